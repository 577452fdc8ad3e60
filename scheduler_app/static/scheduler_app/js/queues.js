/* The queues page, live (live.js): the table and each queue's charts
   (charts.js) from one request per refresh; pause/resume post with fetch(). */
(function () {
    "use strict";

    window.SchedLive.ready(function () {
        var root = document.getElementById("sched-queues");
        if (!root) { return; }
        var minutes = root.dataset.minutes || "60";
        var boxes = root.querySelectorAll(".sched-queue-history");
        Array.prototype.forEach.call(boxes, function (box) {
            var data = document.getElementById(box.dataset.queue);
            if (data && window.SchedCharts) { window.SchedCharts.render(box, JSON.parse(data.textContent)); }
        });
        var live = window.SchedLive(document.getElementById("sched-live"), {
            url: function () { return root.dataset.url + "?minutes=" + minutes; },
            apply: function (data) {
                var table = root.querySelector('[data-section="table"]');
                if (table.innerHTML !== data.html.table) { table.innerHTML = data.html.table; }
                Array.prototype.forEach.call(boxes, function (box) {
                    var h = data.histories[box.dataset.queue];
                    if (h) { window.SchedCharts.render(box, h); }
                });
            }
        });
        root.addEventListener("click", function (event) {
            var button = event.target.closest(".sched-range");
            if (!button) { return; }
            minutes = button.dataset.minutes;
            Array.prototype.forEach.call(root.querySelectorAll(".sched-range"), function (b) {
                b.setAttribute("aria-pressed", b === button ? "true" : "false");
            });
            live.refresh();
        });
        window.SchedLive.postForms(root, live);
    });
})();
