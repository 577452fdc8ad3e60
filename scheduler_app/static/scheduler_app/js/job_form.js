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

/* A job's date and time boxes (in the site's zone, data-site-zone): shortcuts
   that fill them (in 5 minutes, in 1 hour, tomorrow 09:00 in the browser's
   zone), and the time they say, in the browser's zone, beside them. */
(function () {
    "use strict";
    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }
    function pad(n) { return String(n).padStart(2, "0"); }
    // The wall-clock parts of `date` in `zone`.
    function partsIn(date, zone) {
        var out = {};
        new Intl.DateTimeFormat("en-US", {
            timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
            hour: "2-digit", minute: "2-digit", second: "2-digit"
        }).formatToParts(date).forEach(function (p) { out[p.type] = parseInt(p.value, 10); });
        return out;
    }
    // The instant whose wall clock in `zone` reads y-m-d h:mi:s (two rounds settle any offset change).
    function instantIn(y, m, d, h, mi, s, zone) {
        var wanted = Date.UTC(y, m - 1, d, h, mi, s), guess = wanted;
        for (var i = 0; i < 2; i++) {
            var p = partsIn(new Date(guess), zone);
            guess += wanted - Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
        }
        return new Date(guess);
    }
    ready(function () {
        var dateBox = document.querySelector("input[data-site-zone]");
        if (!dateBox || !window.Intl) { return; }
        var timeBox = document.getElementById(dateBox.id.replace(/_0$/, "_1"));
        var zone = dateBox.dataset.siteZone;
        var local = Intl.DateTimeFormat().resolvedOptions().timeZone || "your zone";
        var bar = document.createElement("div");
        bar.className = "sched-when-tools";
        var shown = document.createElement("span");
        shown.className = "sched-when-local";
        shown.setAttribute("aria-live", "polite");
        function fill(date) {
            var p = partsIn(date, zone);
            dateBox.value = p.year + "-" + pad(p.month) + "-" + pad(p.day);
            if (timeBox) { timeBox.value = pad(p.hour) + ":" + pad(p.minute) + ":" + pad(p.second); }
            say();
        }
        function say() {
            var d = /^(\d{4})-(\d{1,2})-(\d{1,2})$/.exec(dateBox.value.trim());
            var t = timeBox ? /^(\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(timeBox.value.trim()) : null;
            if (!d || !t) { shown.textContent = ""; return; }
            var at = instantIn(+d[1], +d[2], +d[3], +t[1], +t[2], +(t[3] || 0), zone);
            var text = new Intl.DateTimeFormat("en-GB", {
                timeZone: local, hourCycle: "h23", weekday: "short", day: "numeric", month: "short",
                hour: "2-digit", minute: "2-digit", timeZoneName: "short"
            }).format(at);
            shown.textContent = local === zone ? "" : "= " + text + " in your zone (" + local + ")";
        }
        [["In 5 minutes", function () { return new Date(Date.now() + 5 * 60000); }],
         ["In 1 hour", function () { return new Date(Date.now() + 3600000); }],
         ["Tomorrow 09:00", function () { var t = new Date(); t.setDate(t.getDate() + 1); t.setHours(9, 0, 0, 0); return t; }]
        ].forEach(function (entry) {
            var button = document.createElement("button");
            button.type = "button";
            button.className = "button sched-when-shortcut";
            button.textContent = entry[0];
            button.addEventListener("click", function () { fill(entry[1]()); });
            bar.appendChild(button);
        });
        bar.appendChild(shown);
        var anchor = (timeBox || dateBox).closest("p.datetime") || (timeBox || dateBox).parentNode;
        anchor.insertAdjacentElement("afterend", bar);
        dateBox.addEventListener("input", say);
        dateBox.addEventListener("change", say);
        if (timeBox) { timeBox.addEventListener("input", say); timeBox.addEventListener("change", say); }
        say();
    });
})();
