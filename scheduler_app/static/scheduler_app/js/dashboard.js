/* The scheduler dashboard refreshes itself: every few seconds it fetches the
   dashboard's JSON view and swaps each section's HTML in place (the server
   renders sections with the same templates as the page), so the page never
   reloads and the scroll position stays. Pause/resume buttons post with
   fetch() and refresh at once. */
(function () {
    "use strict";

    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }

    ready(function () {
        var root = document.getElementById("sched-dashboard");
        if (!root) { return; }
        var url = root.dataset.url;
        var interval = parseInt(root.dataset.refreshMs, 10) || 3000;
        var dot = document.getElementById("sched-live-dot");
        var statusText = document.getElementById("sched-live-status");
        var updated = document.getElementById("sched-updated");
        var timer = null;
        var inFlight = false;

        function setStale(message) {
            dot.classList.add("sched-stale");
            statusText.textContent = message;
        }

        function apply(data) {
            Object.keys(data.html).forEach(function (name) {
                var el = root.querySelector('[data-section="' + name + '"]');
                // Skip unchanged sections so hover and focus survive a refresh.
                if (el && el.innerHTML !== data.html[name]) { el.innerHTML = data.html[name]; }
            });
            var when = new Date(data.generated_at);
            updated.setAttribute("datetime", data.generated_at);
            updated.textContent = when.toLocaleTimeString();
            statusText.textContent = "Updated";
            dot.classList.remove("sched-stale");
            dot.classList.remove("sched-pulse");
            void dot.offsetWidth; // restart the pulse animation
            dot.classList.add("sched-pulse");
            delay = Math.max(interval, 10 * (data.took_ms || 0));
            root.dataset.refreshes = String((parseInt(root.dataset.refreshes || "0", 10)) + 1);
        }

        function refresh() {
            if (inFlight) { return Promise.resolve(); }
            inFlight = true;
            return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
                .then(function (response) {
                    if (response.redirected || response.status === 403 || response.status === 401) {
                        setStale("Signed out: reload the page to sign in again.");
                        stop();
                        return null;
                    }
                    if (!response.ok) { throw new Error("HTTP " + response.status); }
                    return response.json();
                })
                .then(function (data) { if (data) { apply(data); } })
                .catch(function (err) { setStale("Not updated (" + err.message + "), retrying"); })
                .finally(function () { inFlight = false; });
        }

        // Poll every `interval` ms, or 10x the server's time when the numbers are
        // slow to compute, so the dashboard costs the database at most ~10%.
        var delay = interval;
        var running = false;
        function tick() {
            timer = null;
            refresh().then(function () { if (running) { timer = window.setTimeout(tick, delay); } });
        }
        function start() { if (!running) { running = true; timer = window.setTimeout(tick, delay); } }
        function stop() { running = false; if (timer) { window.clearTimeout(timer); timer = null; } }

        document.addEventListener("visibilitychange", function () {
            if (document.hidden) { stop(); } else { start(); refresh(); }
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
                        if (!response.ok) { window.alert(body.error || ("Failed: HTTP " + response.status)); }
                    });
                })
                .catch(function (err) { window.alert("Failed: " + err.message); })
                .finally(refresh);
        });

        start();
    });
})();
