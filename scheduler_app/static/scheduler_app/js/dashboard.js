/* The scheduler dashboard, live (live.js): every few seconds it fetches the
   dashboard's JSON view and swaps each section's HTML in place (the server
   renders sections with the same templates as the page) and redraws the
   history charts (charts.js) for the chosen range; the page never reloads
   and the scroll position stays. Pause/resume buttons post with fetch() and
   refresh at once. */
(function () {
    "use strict";

    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }

    ready(function () {
        var root = document.getElementById("sched-dashboard");
        if (!root) { return; }
        var bar = document.getElementById("sched-live");
        var history = root.querySelector(".sched-history");
        var minutes = root.dataset.minutes || "60";
        var initial = document.getElementById("sched-history-data");
        if (initial && window.SchedCharts) { window.SchedCharts.render(history, JSON.parse(initial.textContent)); }

        function apply(data) {
            Object.keys(data.html).forEach(function (name) {
                var el = root.querySelector('[data-section="' + name + '"]');
                // Skip unchanged sections so hover and focus survive a refresh.
                if (el && el.innerHTML !== data.html[name]) { el.innerHTML = data.html[name]; }
            });
            if (data.history && window.SchedCharts) { window.SchedCharts.render(history, data.history); }
            root.dataset.refreshes = String((parseInt(root.dataset.refreshes || "0", 10)) + 1);
        }

        var live = window.SchedLive(bar, {
            url: function () { return root.dataset.url + "?minutes=" + minutes; },
            apply: apply
        });

        history.addEventListener("click", function (event) {
            var button = event.target.closest(".sched-range");
            if (!button) { return; }
            minutes = button.dataset.minutes;
            root.dataset.minutes = minutes;
            Array.prototype.forEach.call(history.querySelectorAll(".sched-range"), function (b) {
                b.setAttribute("aria-pressed", b === button ? "true" : "false");
            });
            live.refresh();
        });

        root.addEventListener("submit", function (event) {
            var form = event.target;
            if (!form.hasAttribute("data-ajax")) { return; }
            event.preventDefault();
            var button = form.querySelector("button");
            if (button) { button.disabled = true; }
            fetch(form.action, {
                method: "POST",
                body: new FormData(form),
                credentials: "same-origin",
                headers: { "Accept": "application/json", "X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value }
            })
                .then(function (response) {
                    return response.json().then(function (body) {
                        if (!response.ok) { window.SchedNotice(body.error || ("Failed: HTTP " + response.status), "error"); }
                        else { window.SchedNotice(body.message); }
                    });
                })
                .catch(function (err) { window.SchedNotice("Failed: " + err.message, "error"); })
                .finally(function () { live.refresh(); });
        });
    });
})();
