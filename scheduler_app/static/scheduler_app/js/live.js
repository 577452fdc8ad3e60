/* Live pages: one JSON request per page every few seconds, with a visible
   pause/resume and a choice of interval (kept per kind of page in
   localStorage). The page says what to fetch and how to apply it:

       SchedLive(bar, {url: function () { return "..."; }, apply: function (data) { ... }});

   With {html: true}, the answer is a page: apply gets it parsed (a Document).
   A bar with data-swap="#a,#b" needs no script of its own: it fetches the
   page it is on and swaps those elements' contents when they changed (the
   workers list, a workflow's page).

   `bar` is the page's .sched-live-bar (server-rendered, hidden until this
   script starts it). Polling stops while the tab is hidden, slows down when
   the server is slow (at most ~10% of the time, at least every 30 s), and says when the session
   has ended. */
(function () {
    "use strict";

    function SchedLive(bar, options) {
        var select = bar.querySelector(".sched-live-interval");
        var toggle = bar.querySelector(".sched-live-toggle");
        var dot = bar.querySelector(".sched-dot");
        var status = bar.querySelector(".sched-live-status");
        var updated = bar.querySelector(".sched-live-updated");
        var key = "sched-live-ms:" + (bar.dataset.kind || "page");
        var stored = parseInt(window.localStorage.getItem(key) || "", 10);
        var ms = stored || parseInt(bar.dataset.defaultMs || "3000", 10);
        var delay = ms;
        var paused = false;
        var stopped = false;
        var timer = null;
        var inFlight = false;

        if (select) {
            if (!select.querySelector('option[value="' + ms + '"]')) { ms = parseInt(select.value, 10); }
            select.value = String(ms);
        }

        function say(text, stale) {
            status.textContent = text;
            dot.classList.toggle("sched-stale", !!stale);
        }

        function clear() { if (timer) { window.clearTimeout(timer); timer = null; } }

        function schedule() {
            clear();
            if (!paused && !stopped && !document.hidden) { timer = window.setTimeout(tick, delay); }
        }

        function tick() { timer = null; refresh().then(schedule); }

        function refresh() {
            if (inFlight || stopped) { return Promise.resolve(); }
            inFlight = true;
            var started = Date.now();
            var accept = options.html ? "text/html" : "application/json";
            return fetch(options.url(), { credentials: "same-origin", headers: { "Accept": accept } })
                .then(function (response) {
                    if (response.redirected || response.status === 401 || response.status === 403) {
                        stopped = true;
                        say("Signed out: reload the page to sign in again.", true);
                        return null;
                    }
                    if (!response.ok) { throw new Error("HTTP " + response.status); }
                    if (options.html) {
                        return response.text().then(function (text) { return new DOMParser().parseFromString(text, "text/html"); });
                    }
                    return response.json();
                })
                .then(function (data) {
                    if (!data) { return; }
                    options.apply(data);
                    var took = Date.now() - started;
                    // Slow down when the server is slow, but never below one
                    // refresh every 30 s: a live page that stops is a lie.
                    delay = Math.max(ms, Math.min(10 * took, 30000));
                    if (updated) {
                        var at = options.html ? null : (data.generated_at || data.at);
                        at = at ? new Date(at) : new Date();
                        updated.textContent = SchedTime.clock(at);
                        updated.setAttribute("datetime", at.toISOString());
                        updated.parentNode.hidden = false;
                    }
                    say(paused ? "Paused" : "Live", false);
                    dot.classList.remove("sched-pulse");
                    void dot.offsetWidth; // restart the pulse
                    dot.classList.add("sched-pulse");
                    bar.dataset.refreshes = String(parseInt(bar.dataset.refreshes || "0", 10) + 1);
                })
                .catch(function (err) { say("Not updated (" + err.message + "), retrying", true); })
                .finally(function () { inFlight = false; });
        }

        if (toggle) {
            toggle.addEventListener("click", function () {
                paused = !paused;
                toggle.textContent = paused ? "Resume updates" : "Pause updates";
                toggle.setAttribute("aria-pressed", paused ? "true" : "false");
                bar.classList.toggle("sched-live-paused", paused);
                say(paused ? "Paused" : "Live", false);
                if (!paused) { refresh().then(schedule); } else { clear(); }
            });
        }
        if (select) {
            select.addEventListener("change", function () {
                ms = parseInt(select.value, 10) || 3000;
                delay = ms;
                window.localStorage.setItem(key, String(ms));
                schedule();
            });
        }
        document.addEventListener("visibilitychange", function () {
            if (document.hidden) { clear(); } else { refresh().then(schedule); }
        });

        bar.hidden = false;
        say("Live", false);
        schedule();
        return { refresh: function () { return refresh().then(schedule); }, bar: bar };
    }

    /* One clock on every page: 24-hour, in the site's time zone (TIME_ZONE,
       named on the live bar), as the server writes its times. */
    var SchedTime = {
        zone: function () {
            var bar = document.getElementById("sched-live");
            return (bar && bar.dataset.timeZone) || undefined;
        },
        parts: function (date, options) {
            var base = { hourCycle: "h23", timeZone: SchedTime.zone() };
            try { return new Intl.DateTimeFormat("en-GB", Object.assign(base, options)).format(date); }
            catch (e) { delete base.timeZone; return new Intl.DateTimeFormat("en-GB", Object.assign(base, options)).format(date); }
        },
        /* "07:26:46 UTC" */
        clock: function (date) {
            var zone = SchedTime.parts(date, { timeZoneName: "short" }).split(" ").pop();
            return SchedTime.parts(date, { hour: "2-digit", minute: "2-digit", second: "2-digit" }) + " " + zone;
        },
        /* "07:26", or "27 Nov 07:00" (withDay) */
        hm: function (date, withDay) {
            var hm = SchedTime.parts(date, { hour: "2-digit", minute: "2-digit" });
            return withDay ? SchedTime.parts(date, { day: "numeric", month: "short" }) + " " + hm : hm;
        }
    };

    /* Post the forms under `root` marked data-ajax with fetch() (a queue's pause
       and resume), say the answer (SchedNotice), then refresh `live` at once.
       With {disable: true} the form's button is disabled while it posts (the
       refresh brings the section back with a fresh one). */
    SchedLive.postForms = function (root, live, options) {
        root.addEventListener("submit", function (event) {
            var form = event.target;
            if (!form.hasAttribute("data-ajax")) { return; }
            event.preventDefault();
            var button = form.querySelector("button");
            if (button && options && options.disable) { button.disabled = true; }
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
    };
    /* Run fn once the page is parsed (at once if it is already). */
    SchedLive.ready = ready;

    window.SchedLive = SchedLive;
    window.SchedTime = SchedTime;

    /* A message at the top of the page, as the admin's own messages look
       (a queue paused with fetch(), where no page load brings one). */
    window.SchedNotice = function (text, level) {
        var content = document.getElementById("content");
        if (!content || !text) { return; }
        var list = document.getElementById("sched-notice");
        if (!list) {
            list = document.createElement("ul");
            list.className = "messagelist";
            list.id = "sched-notice";
            list.setAttribute("role", "status");
            content.parentNode.insertBefore(list, content);
        }
        var item = document.createElement("li");
        item.className = level || "success";
        item.textContent = text;
        list.replaceChildren(item);
    };

    function swapPage(bar) {
        var selectors = bar.dataset.swap.split(",");
        SchedLive(bar, {
            html: true,
            url: function () { return window.location.href; },
            apply: function (doc) {
                selectors.forEach(function (selector) {
                    var fresh = doc.querySelector(selector), old = document.querySelector(selector);
                    if (fresh && old && old.innerHTML !== fresh.innerHTML) { old.innerHTML = fresh.innerHTML; }
                });
                bar.dataset.swaps = String(parseInt(bar.dataset.swaps || "0", 10) + 1);
            }
        });
    }

    function ready(fn) {
        if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
    }
    ready(function () {
        var bar = document.getElementById("sched-live");
        if (bar && bar.dataset.swap) { swapPage(bar); }
    });
})();
