/* History charts in plain SVG (no library, no CDN): stacked bars of
   outcomes, and lines of depth, lag and wait/run percentiles, drawn from a
   GET /api/stats/history/ document. Each SVG is drawn at its box's own
   width (one unit a pixel), so labels keep their 11 px at every width, and
   is drawn again when the window is resized; it never makes a page wider
   than the screen. Times are 24-hour in the site's zone (SchedTime, live.js). */
(function () {
    "use strict";

    var NS = "http://www.w3.org/2000/svg";
    var W = 600, H = 170, LEFT = 50, RIGHT = 8, TOP = 10, BOTTOM = 22;

    function el(name, attrs, text) {
        var node = document.createElementNS(NS, name);
        Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
        if (text !== undefined) { node.textContent = text; }
        return node;
    }

    function nice(peak) {
        var v = 1;
        if (peak <= 0) { return 1; }
        if (peak < 1) { v = 0.001; }
        for (;;) {
            var steps = [1, 2, 5];
            for (var i = 0; i < steps.length; i++) { if (v * steps[i] >= peak) { return v * steps[i]; } }
            v *= 10;
        }
    }

    function seconds(v) {
        if (v === null || v === undefined) { return "–"; }
        if (v < 1) { return Math.round(v * 1000) + " ms"; }
        if (v < 60) { return (v < 10 ? v.toFixed(1) : Math.round(v)) + " s"; }
        if (v < 3600) { return Math.round(v / 60) + " min"; }
        return (v / 3600).toFixed(1) + " h";
    }

    function count(v) { return v >= 10000 ? Math.round(v / 1000) + "k" : String(Math.round(v * 100) / 100); }

    function label(iso, step) {
        var d = new Date(iso);
        if (window.SchedTime) { return window.SchedTime.hm(d, step >= 3600); }
        var hm = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
        return step >= 3600 ? d.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + hm : hm;
    }

    function noData(svg) {
        svg.appendChild(el("text", { "class": "label sched-no-data", x: LEFT + (W - LEFT - RIGHT) / 2, y: TOP + (H - TOP - BOTTOM) / 2, "text-anchor": "middle" }, "no data"));
        svg.dataset.empty = "true";
    }

    function frame(svg, buckets, step, top, format, caption) {
        var plotH = H - TOP - BOTTOM;
        svg.appendChild(el("line", { "class": "grid", x1: LEFT, x2: W - RIGHT, y1: TOP, y2: TOP }));
        svg.appendChild(el("line", { "class": "grid", x1: LEFT, x2: W - RIGHT, y1: TOP + plotH / 2, y2: TOP + plotH / 2 }));
        svg.appendChild(el("line", { "class": "axis", x1: LEFT, x2: W - RIGHT, y1: TOP + plotH, y2: TOP + plotH }));
        svg.appendChild(el("text", { "class": "label", x: LEFT - 4, y: TOP + 4, "text-anchor": "end" }, format(top)));
        svg.appendChild(el("text", { "class": "label", x: LEFT - 4, y: TOP + plotH / 2 + 4, "text-anchor": "end" }, format(top / 2)));
        svg.appendChild(el("text", { "class": "label", x: LEFT - 4, y: TOP + plotH + 4, "text-anchor": "end" }, format(0)));
        var n = buckets.length, fits = Math.max(2, Math.floor((W - LEFT - RIGHT) / (step >= 3600 ? 110 : 64)));
        var every = Math.max(1, Math.ceil(n / fits));
        for (var i = 0; i < n; i += every) {
            var x = LEFT + (i + 0.5) * (W - LEFT - RIGHT) / n;
            svg.appendChild(el("text", { "class": "label", x: x, y: H - 6, "text-anchor": "middle" }, label(buckets[i].start, step)));
        }
        svg.setAttribute("aria-label", caption);
        return plotH;
    }

    function svgBox() {
        return el("svg", { "class": "sched-chart", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", preserveAspectRatio: "xMidYMid meet" });
    }

    function legend(series) {
        var p = document.createElement("p");
        p.className = "sched-legend";
        series.forEach(function (s) {
            var sw = document.createElement("span");
            sw.className = "sched-swatch " + s.cls;
            p.appendChild(sw);
            p.appendChild(document.createTextNode(" " + s.label + (s.total !== undefined ? " (" + s.total + ")" : "") + " "));
        });
        return p;
    }

    /* Adjacent buckets added up until each bar is MIN_BAR px wide or more
       (an hour of minutes in a 300 px box would be 3 px bars). */
    var MIN_BAR = 6;
    function merged(buckets, step, series, width) {
        var per = Math.max(1, Math.ceil(MIN_BAR * buckets.length / width));
        if (per === 1) { return { buckets: buckets, step: step }; }
        var out = [];
        for (var i = 0; i < buckets.length; i += per) {
            var sum = { start: buckets[i].start };
            series.forEach(function (s) {
                sum[s.key] = 0;
                for (var j = i; j < Math.min(i + per, buckets.length); j++) { sum[s.key] += buckets[j][s.key]; }
            });
            out.push(sum);
        }
        return { buckets: out, step: step * per };
    }

    function bars(box, history, series, caption) {
        var joined = merged(history.buckets, history.bucket_seconds, series, W - LEFT - RIGHT);
        var b = joined.buckets, step = joined.step;
        var peak = 0;
        b.forEach(function (x) { var t = 0; series.forEach(function (s) { t += x[s.key]; }); peak = Math.max(peak, t); });
        var top = nice(peak), svg = svgBox();
        var plotH = frame(svg, b, step, top, count, caption);
        var w = (W - LEFT - RIGHT) / b.length;
        b.forEach(function (x, i) {
            var g = el("g"), y = TOP + plotH, parts = [];
            series.forEach(function (s) {
                var h = plotH * x[s.key] / top;
                if (h > 0) { y -= h; g.appendChild(el("rect", { "class": s.cls, x: LEFT + i * w + 0.5, y: y, width: Math.max(w - 1, 0.5), height: h })); }
                parts.push(x[s.key] + " " + s.label);
            });
            g.insertBefore(el("rect", { "class": "bar-hit", x: LEFT + i * w, y: TOP, width: w, height: plotH }), g.firstChild);
            g.appendChild(el("title", {}, label(x.start, step) + ": " + parts.join(", ")));
            svg.appendChild(g);
        });
        series.forEach(function (s) { s.total = b.reduce(function (a, x) { return a + x[s.key]; }, 0); });
        if (peak <= 0) { noData(svg); }
        box.replaceChildren(svg, legend(series));
    }

    function lines(box, history, series, format, caption) {
        var b = history.buckets, step = history.bucket_seconds;
        var peak = 0;
        b.forEach(function (x) { series.forEach(function (s) { var v = s.get(x); if (v !== null && v !== undefined) { peak = Math.max(peak, v); } }); });
        var top = nice(peak), svg = svgBox();
        var plotH = frame(svg, b, step, top, format, caption);
        var w = (W - LEFT - RIGHT) / b.length;
        series.forEach(function (s) {
            if (peak <= 0) { return; }  // "no data", not a line along the axis
            var d = "", pen = "M";
            b.forEach(function (x, i) {
                var v = s.get(x);
                if (v === null || v === undefined) { pen = "M"; return; }
                d += pen + (LEFT + (i + 0.5) * w).toFixed(1) + "," + (TOP + plotH - plotH * v / top).toFixed(1) + " ";
                pen = "L";
            });
            if (d) { svg.appendChild(el("path", { "class": "line " + s.cls, d: d })); }
        });
        b.forEach(function (x, i) {
            var g = el("g");
            g.appendChild(el("rect", { "class": "bar-hit", x: LEFT + i * w, y: TOP, width: w, height: plotH }));
            g.appendChild(el("title", {}, label(x.start, step) + ": " + series.map(function (s) { return s.label + " " + format(s.get(x)); }).join(", ")));
            svg.appendChild(g);
        });
        if (peak <= 0) { noData(svg); }
        box.replaceChildren(svg, legend(series));
    }

    var OUTCOMES = [
        { key: "succeeded", label: "succeeded", cls: "c-ok" },
        { key: "retried", label: "retried", cls: "c-retry" },
        { key: "failed", label: "failed", cls: "c-fail" },
        { key: "cancelled", label: "cancelled", cls: "c-cancel" }
    ];

    function timing(name) {
        return [
            { label: "p50", cls: "c-p50", get: function (x) { return x[name].p50; } },
            { label: "p95", cls: "c-p95", get: function (x) { return x[name].p95; } },
            { label: "max", cls: "c-max", get: function (x) { return x[name].max; } }
        ];
    }

    /* Draw every [data-chart] box inside `root` from `history`. */
    function render(root, history) {
        drawn.set(root, history);
        Array.prototype.forEach.call(root.querySelectorAll("[data-chart]"), function (box) {
            var kind = box.dataset.chart;
            W = Math.max(200, Math.floor(box.clientWidth || 600));
            var copy = function (list) { return list.map(function (s) { return Object.assign({}, s); }); };
            if (kind === "throughput") {
                bars(box, history, copy(OUTCOMES), "Attempts finished per bucket, by outcome");
            } else if (kind === "depth") {
                lines(box, history, [
                    { label: "pending", cls: "c-depth", get: function (x) { return x.depth; } },
                    { label: "due now", cls: "c-due", get: function (x) { return x.due; } }
                ], count, "Pending and due now");
            } else if (kind === "lag") {
                lines(box, history, [{ label: "oldest due lag", cls: "c-lag", get: function (x) { return x.lag; } }], seconds, "Oldest due lag");
            } else if (kind === "runtime") {
                lines(box, history, timing("run").slice(0, 2), seconds, "Run time p50 and p95");
            } else if (kind === "wait" || kind === "run") {
                lines(box, history, timing(kind), seconds, kind === "wait" ? "Wait time, due to start" : "Run time, start to finish");
            }
        });
    }

    // Drawn again at the new width when the window is resized.
    var drawn = new Map(), resizing = null;
    window.addEventListener("resize", function () {
        window.clearTimeout(resizing);
        resizing = window.setTimeout(function () { drawn.forEach(function (history, root) { render(root, history); }); }, 150);
    });

    window.SchedCharts = { render: render, seconds: seconds };

    /* Boxes that carry their own history (data-history: the id of a
       json_script), such as the per-task run time charts. */
    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }
    ready(function () {
        Array.prototype.forEach.call(document.querySelectorAll("[data-history]"), function (root) {
            var script = document.getElementById(root.dataset.history);
            if (script) { render(root, JSON.parse(script.textContent)); }
        });
    });
})();
