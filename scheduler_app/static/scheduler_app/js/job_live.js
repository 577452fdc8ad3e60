/* The job page and the job list, live (see live.js): the page swaps its
   changing read-only fields, the list its rows' changing cells, from one
   request per refresh. */
(function () {
    "use strict";

    var ready = window.SchedLive.ready;  // live.js comes first

    // What the reader opened or closed (a <details data-key>): kept across
    // refreshes; the others take the server's default (the newest open).
    var chosen = {};
    document.addEventListener("click", function (event) {
        var summary = event.target.closest && event.target.closest("details[data-key] > summary");
        if (summary) { chosen[summary.parentNode.dataset.key] = !summary.parentNode.open; }
    });

    function swap(el, html) {
        // Skip unchanged cells so hover, focus and open <details> survive.
        if (el && el.innerHTML !== html) {
            var open = Array.prototype.map.call(el.querySelectorAll("details[open]:not([data-key])"), function (d) { return d.querySelector("summary") && d.querySelector("summary").textContent; });
            el.innerHTML = html;
            Array.prototype.forEach.call(el.querySelectorAll("details"), function (d) {
                if (d.dataset.key) {
                    if (Object.prototype.hasOwnProperty.call(chosen, d.dataset.key)) { d.open = chosen[d.dataset.key]; }
                    return;
                }
                var s = d.querySelector("summary");
                if (s && open.indexOf(s.textContent) >= 0) { d.open = true; }
            });
        }
    }

    ready(function () {
        var bar = document.getElementById("sched-live");
        if (!bar || !window.SchedLive) { return; }
        if (bar.dataset.kind === "job-page") {
            window.SchedLive(bar, {
                url: function () { return bar.dataset.liveUrl; },
                apply: function (data) {
                    Object.keys(data.fields).forEach(function (name) {
                        swap(document.querySelector(".field-" + name + " .readonly"), data.fields[name]);
                    });
                    if (data.summary !== undefined) { swap(document.getElementById("sched-summary"), data.summary); }
                    document.body.dataset.jobStatus = data.status;
                }
            });
        } else if (bar.dataset.kind === "job-list") {
            var boxes = function () { return Array.prototype.slice.call(document.querySelectorAll("#result_list input.action-select")); };
            var shown = function () { return boxes().map(function (b) { return b.value; }); };
            var reloading = false;
            // The list's rows again (a new job, one that left the filter): the
            // page's own form, fetched whole, so its actions and paginator agree.
            // Not while the reader has rows selected: their rows stay put.
            var reloadRows = function () {
                if (reloading || boxes().some(function (b) { return b.checked; })) { return; }
                reloading = true;
                fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
                    .then(function (response) { return response.ok && !response.redirected ? response.text() : null; })
                    .then(function (html) {
                        if (!html) { return; }
                        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("changelist-form");
                        var old = document.getElementById("changelist-form");
                        if (!fresh || !old || boxes().some(function (b) { return b.checked; })) { return; }
                        old.replaceWith(document.importNode(fresh, true));
                        var checks = document.querySelectorAll("tr input.action-select");
                        if (checks.length && window.Actions) { window.Actions(checks); }
                        bar.dataset.rowReloads = String(parseInt(bar.dataset.rowReloads || "0", 10) + 1);
                    })
                    .catch(function () { /* the next refresh tries again */ })
                    .finally(function () { reloading = false; });
            };
            window.SchedLive(bar, {
                url: function () {
                    return bar.dataset.liveUrl + "?ids=" + shown().join(",") +
                        "&list=" + encodeURIComponent(window.location.search.replace(/^\?/, ""));
                },
                apply: function (data) {
                    boxes().forEach(function (box) {
                        var cells = data.rows[box.value];
                        var row = box.closest("tr");
                        if (!cells || !row) { return; }
                        Object.keys(cells).forEach(function (name) { swap(row.querySelector(".field-" + name), cells[name]); });
                    });
                    if (data.page && data.page.join(",") !== shown().join(",")) { reloadRows(); }
                }
            });
        }
    });
})();
