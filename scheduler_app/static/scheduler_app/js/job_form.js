/* Add-job form: show the chosen task's signature, docstring and @options, and
   put its defaults in the placeholders of the fields (empty means "default"). */
(function () {
    "use strict";
    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }
    function describeOptions(options) {
        var parts = [];
        Object.keys(options).forEach(function (key) {
            var value = options[key];
            parts.push(key + "=" + (Array.isArray(value) ? "(" + value.join(", ") + ")" : String(value)));
        });
        return parts.length ? "@options(" + parts.join(", ") + ")" : "";
    }
    ready(function () {
        var select = document.getElementById("id_task");
        if (!select || select.tagName !== "SELECT") { return; }
        var info = document.createElement("div");
        info.className = "sched-task-info";
        info.id = "sched-task-info";
        var signature = document.createElement("code");
        var options = document.createElement("code");
        var doc = document.createElement("p");
        info.append(signature, document.createElement("br"), options, doc);
        select.insertAdjacentElement("afterend", info);
        var fields = {
            priority: document.getElementById("id_priority"),
            max_attempts: document.getElementById("id_max_attempts"),
            timeout: document.getElementById("id_timeout")
        };
        var queue = document.getElementById("id_queue");
        var queueBlank = queue ? queue.querySelector('option[value=""]') : null;
        var queueBlankText = queueBlank ? queueBlank.textContent : "";

        function update() {
            var option = select.options[select.selectedIndex];
            var data = option ? option.dataset : {};
            var taskOptions = {};
            try { taskOptions = data.options ? JSON.parse(data.options) : {}; } catch (e) { taskOptions = {}; }
            signature.textContent = data.signature || "";
            options.textContent = describeOptions(taskOptions);
            doc.textContent = data.doc || "";
            if (fields.priority) { fields.priority.placeholder = data.priority !== undefined ? "default: " + data.priority : ""; }
            if (fields.max_attempts) {
                fields.max_attempts.placeholder = taskOptions.max_attempts !== undefined ? "task: " + taskOptions.max_attempts : "";
            }
            if (fields.timeout) {
                fields.timeout.placeholder = taskOptions.timeout !== undefined ? "task: " + taskOptions.timeout + " s" : "";
            }
            if (queueBlank) { queueBlank.textContent = data.queue ? "(the task's queue: " + data.queue + ")" : queueBlankText; }
        }
        select.addEventListener("change", update);
        update();
    });
})();
