/* The scheduler dashboard, live (live.js): every few seconds it fetches the
   dashboard's JSON view and swaps each section's HTML in place (the server
   renders sections with the same templates as the page) and redraws the
   history charts (charts.js) for the chosen range; the page never reloads
   and the scroll position stays. Pause/resume buttons post with fetch() and
   refresh at once. */
(function () {
    "use strict";

    window.SchedLive.ready(function () {
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

        window.SchedLive.postForms(root, live, { disable: true });
    });
})();
