/* Add-job form: show the chosen task's docstring, and put its default queue
   and priority in the placeholders of those fields (empty means "default"). */
(function () {
    "use strict";
    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }
    ready(function () {
        var select = document.getElementById("id_task");
        if (!select || select.tagName !== "SELECT") { return; }
        var info = document.createElement("p");
        info.className = "sched-task-info";
        info.id = "sched-task-info";
        select.insertAdjacentElement("afterend", info);
        var priority = document.getElementById("id_priority");
        var queue = document.getElementById("id_queue");
        var queueBlank = queue ? queue.querySelector('option[value=""]') : null;
        var queueBlankText = queueBlank ? queueBlank.textContent : "";

        function update() {
            var option = select.options[select.selectedIndex];
            var data = option ? option.dataset : {};
            info.textContent = data.doc || "";
            if (priority) { priority.placeholder = data.priority !== undefined ? "default: " + data.priority : ""; }
            if (queueBlank) { queueBlank.textContent = data.queue ? "(the task's queue: " + data.queue + ")" : queueBlankText; }
        }
        select.addEventListener("change", update);
        update();
    });
})();
