"""Render a results dict (bench/run.py) as Markdown; write the generated parts of the docs."""

import os
import re
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABEL = {
    "ours": "**this project**",
    "dtdb": "django-tasks-db 0.13.0",
    "procrastinate": "procrastinate 3.10.0",
    "djangoq": "django-q2 1.11.1 (ORM broker)",
    "pgqueuer": "pgqueuer 1.6.0",
    "oban": "oban 0.7.0 (Python)",
    "chancy": "chancy 0.26.0",
    "dbos": "DBOS 3.4.0",
}
DBL = {"pg": "PostgreSQL", "sqlite": "SQLite"}


def fmt(x, digits=0):
    if x is None:
        return "-"
    if digits == 0 or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def ms(s, digits=1):
    """median (min–max) of a summary dict."""
    if not s or s.get("median") is None:
        return "-"
    if s.get("n", 1) <= 1 or s["min"] == s["max"]:
        return fmt(s["median"], digits)
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def med(s):
    return None if not s else s.get("median")


def claims_cell(v):
    """The claim-to-start delay's p50 / p99 / max (median of repetitions), '-' where not measured (peers)."""
    if "claim_p50" not in v:
        return "-"
    return " / ".join(fmt(med(v[k]), 1) for k in ("claim_p50", "claim_p99", "claim_max"))


def floor_tables(r):
    """(bare, project) claim floors {batch: entry}; a results file from before the bare table has only
    the project-table floor."""
    floor = r.get("floor", {})
    if "bare" in floor or "project" in floor:
        return floor.get("bare", {}), floor.get("project", {})
    return {}, floor


PEERS = ("dtdb", "procrastinate", "djangoq")  # the Django peers: issue #15's and #28's "best peer"
NEW_PEERS = ("pgqueuer", "oban", "chancy", "dbos")
NA = "not measured in this run"


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(ok):
    if ok is None:
        return "-"
    return "met" if ok else "**not met**"


class Targets:
    """The rows of a targets table; a row without a result says "not measured in this run"."""

    def __init__(self):
        self.rows = []

    def add(self, target, required, result=None):
        """``result``: (what was measured, the achieved ratio, met?), or None when not measured."""
        measured, achieved, ok = result or (NA, "-", None)
        self.rows.append([target, measured, required, achieved, verdict(ok)])

    def render(self, title):
        met = sum(1 for x in self.rows if x[-1] == "met")
        missed = sum(1 for x in self.rows if x[-1] not in ("met", "-", "not available"))
        return (
            f"### {title}: {met} met, {missed} not met, {len(self.rows) - met - missed} not measured\n\n"
            "Every ratio compares numbers measured in this run, on this machine (peers, floor and this project "
            "back to back); compare ratios, never absolute numbers across machines. Medians of the "
            "repetitions.\n\n" + table(["target", "measured", "required", "achieved", ""], self.rows) + "\n"
        )


# -- the rules, each in one place: (required, result or None) for Targets.add


def best_peer(entries, value, suffixes=("",)):
    """(the highest ``value(entry)``, its peer, its entry) over the peers' PostgreSQL entries
    ``{peer}/pg{suffix}``; (None, None, None) when no peer has one."""
    found = [(value(entries[k]), p, entries[k]) for p in PEERS for s in suffixes if (k := f"{p}/pg{s}") in entries]
    found = [x for x in found if x[0]]
    return max(found, key=lambda x: x[0]) if found else (None, None, None)


def loss(value, base):
    """How much ``value`` loses against ``base``, in words."""
    if value < base:
        return f"loses {100 * (1 - value / base):.1f} %"
    return f"loses nothing ({100 * (value / base - 1):.1f} % faster)"


def ours_noop_rate(r, cfg, slots):
    """Ours' no-op throughput (one dispatcher, PostgreSQL) at ``slots``: the curve's N, else any N."""
    tp = r.get("throughput", {}).get("ours", {})
    key = f"pg/n={cfg.get('curve_n')}/slots={slots}"
    if key not in tp:
        key = next((k for k in tp if k.startswith("pg/") and k.endswith(f"/slots={slots}")), None)
    return med(tp[key]["jobs_per_s"]) if key else None


FLOOR_SHARES = ((4, 0.85), (16, 0.50), (64, 0.35))  # no-op jobs: slots, share of the bare-table floor


def floor_share(r, cfg, slots, share):
    """No-op jobs with ``slots`` slots against the bare-table floor at batch = slots."""
    req = f"≥ {100 * share:.0f} % of the floor (bare table, claim index only)"
    bare, project = floor_tables(r)
    o, fl = ours_noop_rate(r, cfg, slots), med(bare.get(str(slots), {}).get("jobs_per_s"))
    if not (o and fl):
        return req, None
    # The same statements on this project's table: the ceiling any loop over it can reach.
    pj = med(project.get(str(slots), {}).get("jobs_per_s"))
    on_project = (
        f" (project-table floor {fmt(pj)} jobs/s = {100 * pj / fl:.0f} % of the bare one; "
        f"ours {100 * o / pj:.0f} % of it)"
        if pj
        else ""
    )
    return req, (f"{fmt(o)} jobs/s; floor {fmt(fl)} jobs/s{on_project}", f"{100 * o / fl:.0f} %", o >= share * fl)


def pickup(r, q, limit):
    req = f"≤ {fmt(limit, 1)} ms (absolute)"
    v = med((r.get("pickup", {}).get("ours/pg/orm") or {}).get(q))
    return req, None if v is None else (f"{fmt(v, 2)} ms", f"{fmt(v, 2)} ms", v <= limit)


def lateness(r, cfg, busy, q, limit):
    """(row name, required, result): lateness ``q`` with slots busy (``precision_busy``) or idle (``precision``)."""
    v = r.get("precision_busy" if busy else "precision", {}).get("ours/pg")
    label = (
        f"{(v or {}).get('busy', 2)} of 4 slots busy with sleeping jobs"
        if busy
        else "4 idle slots (the earlier condition, for reference)"
    )
    name = f"lateness {q}, {fmt(cfg.get('prec_n'))} jobs over {fmt(cfg.get('prec_spread'))} s, {label}"
    x = med(v.get(q)) if v else None
    result = None if x is None else (f"{fmt(x, 1)} ms", f"{fmt(x, 1)} ms", x <= limit)
    return name, f"≤ {fmt(limit)} ms (absolute)", result


def processes_gain(r, slots=16, need=1.4):
    pr = r.get("processes", {})
    one, two = med(pr.get(f"1/{slots}", {}).get("jobs_per_s")), med(pr.get(f"2/{slots}", {}).get("jobs_per_s"))
    req = f"≥ {need}x"
    if not (one and two):
        return req, None
    return req, (f"1 process {fmt(one)} jobs/s; 2 processes {fmt(two)} jobs/s", f"{two / one:.2f}x", two >= need * one)


def against_best_peer(r, ours_key, value, what="", how=lambda entry: ""):
    """This project's enqueue rate ``ours_key`` against the best peer's ``value(entry)`` (PostgreSQL): ≥ 1.0x."""
    enq = r.get("enqueue", {})
    o = med(enq.get("ours/pg", {}).get(ours_key))
    best, peer, entry = best_peer(enq, value)
    req = f"≥ 1.0x the best peer{what}"
    if not (o and best):
        return req, None
    return req, (
        f"this project {fmt(o)}/s; best peer ({LABEL[peer]}{how(entry)}) {fmt(best)}/s",
        f"{o / best:.2f}x",
        o >= best,
    )


def peer_bulk(entry):
    """A peer's fastest way to enqueue many: its bulk call where it has one, else its loop in one transaction."""
    return med(entry.get("bulk_per_s")) or med(entry.get("in_tx_per_s"))


def peer_bulk_how(entry):
    return ", `batch_defer()`" if med(entry.get("bulk_per_s")) else ", no bulk call: its loop in one transaction"


def targets(results):
    """The Targets table (issue #15): every target as a ratio measured within this run."""
    r = results.get("results", {})
    cfg = results.get("config", {})
    t = Targets()

    def row(target, measured=NA, required="", achieved="-", ok=None):
        t.add(target, required, None if measured == NA else (measured, achieved, ok))

    # 1. Enqueue
    enq = r.get("enqueue", {})
    ours = enq.get("ours/pg", {})
    floor = enq.get("floor/pg", {})

    def best_of(key):
        return best_peer(enq, lambda e: med(e.get(key)))[:2]

    o, (best, bname), f = med(ours.get("enqueue_per_s")), best_of("enqueue_per_s"), med(floor.get("enqueue_per_s"))
    req = "≥ 1.5x the best peer; where lower, ≥ 80 % of the floor"
    if o and best:
        need_peer, need_floor = 1.5 * best, (0.8 * f if f else None)
        need = min(need_peer, need_floor) if need_floor else need_peer
        binding = "80 % of the floor" if need_floor and need_floor < need_peer else "1.5x the best peer"
        if not f:
            binding += "; the floor was not measured"
        row(
            "1a. `task.enqueue()` one at a time, autocommit",
            f"this project {fmt(o)}/s; best peer ({LABEL[bname]}) {fmt(best)}/s"
            + (f"; floor (INSERT + NOTIFY) {fmt(f)}/s" if f else ""),
            f"{req}: 1.5x = {fmt(need_peer)}/s"
            + (f", 80 % = {fmt(need_floor)}/s" if f else "")
            + f" → **{fmt(need)}/s** ({binding})",
            f"{ratio(o, best):.2f}x the best peer" + (f", {100 * o / f:.0f} % of the floor" if f else ""),
            o >= need,
        )
    else:
        row("1a. `task.enqueue()` one at a time, autocommit", required=req)

    o, (best, bname), f = med(ours.get("in_tx_per_s")), best_of("in_tx_per_s"), med(floor.get("in_tx_per_s"))
    req = "≥ 1.0x the best peer's same loop"
    if o and best:
        row(
            "1b. a loop of `task.enqueue()` in one `transaction.atomic()`",
            f"this project {fmt(o)}/s; best peer ({LABEL[bname]}) {fmt(best)}/s; floor (same statements in one "
            f"transaction) {fmt(f)}/s",
            req,
            f"{ratio(o, best):.2f}x" + (f" ({100 * o / f:.0f} % of the floor)" if f else ""),
            o >= best,
        )
    else:
        row("1b. a loop of `task.enqueue()` in one `transaction.atomic()`", required=req)

    many, single = med(ours.get("enqueue_many_per_s")), med(ours.get("enqueue_per_s"))
    req = "≥ 10x (1a)"
    if many and single:
        row(
            f"1c. `scheduler_app.enqueue_many(items)`, {fmt(cfg.get('enqueue_many_batch', 1000))} items per call",
            f"{fmt(many)} jobs/s; (1a) {fmt(single)}/s",
            req,
            f"{many / single:.1f}x",
            many >= 10 * single,
        )
    else:
        row("1c. `scheduler_app.enqueue_many(items)`", required=req)
    bulk = med(ours.get("api_bulk_per_s"))
    req = "≥ 0.5x (1c)"
    if bulk and many:
        row(
            "1d. `POST /api/jobs/bulk/`, 1,000 jobs per request",
            f"{fmt(bulk)} jobs/s; (1c) {fmt(many)} jobs/s",
            req,
            f"{bulk / many:.2f}x",
            bulk >= 0.5 * many,
        )
    else:
        row("1d. `POST /api/jobs/bulk/`, 1,000 jobs per request", required=req)

    # 2. Pickup (absolute)
    for q, limit in (("p50", 3.0), ("p99", 6.0)):
        t.add(
            f"2{'a' if q == 'p50' else 'b'}. pickup {q}, from before `task.enqueue()` to the job's first statement",
            *pickup(r, q, limit),
        )

    # 3. Throughput against the floor (bare table, batch = slots)
    for slots, share in FLOOR_SHARES:
        t.add(
            f"3. throughput, one dispatcher, {slots} slots, against the floor at batch {slots}",
            *floor_share(r, cfg, slots, share),
        )

    # 4. Default logging
    lg = r.get("logging", {})
    d, w = med(lg.get("default", {}).get("jobs_per_s")), med(lg.get("warning", {}).get("jobs_per_s"))
    name, req = "4. 4 slots at the default log level against `SCHEDULER_LOG_LEVEL=WARNING`", "≥ 95 % (within 5 %)"
    if d and w:
        row(name, f"default {fmt(d)} jobs/s; WARNING {fmt(w)} jobs/s", req, f"{100 * d / w:.0f} %", d >= 0.95 * w)
    else:
        row(name, required=req)

    # 5. Lateness
    for busy in (True, False):
        for q, limit in (("p99", 5.0), ("max", 25.0)):
            name, req, result = lateness(r, cfg, busy, q, limit)
            t.add(f"5. {name}", req, result)

    # 6. Dispatcher processes
    t.add("6. `rundispatcher --processes 2` against 1, `--concurrency 16` each", *processes_gain(r))

    # 7. Per-job log line
    jl = r.get("joblog", {})
    for level, label in (("default", "default log level"), ("warning", "`SCHEDULER_LOG_LEVEL=WARNING`")):
        lo, no = (
            med(jl.get(f"log_one/{level}", {}).get("jobs_per_s")),
            med(jl.get(f"noop/{level}", {}).get("jobs_per_s")),
        )
        name = f"7. 4 slots, a task logging one INFO line against a no-op ({label})"
        req = "loses < 10 %"
        if lo and no:
            row(name, f"log_one {fmt(lo)} jobs/s; noop {fmt(no)} jobs/s", req, loss(lo, no), lo > 0.9 * no)
        else:
            row(name, required=req)

    return t.render("Targets (issue #15, PostgreSQL)")


def targets_28(results):
    """The Targets table of issue #28: every target as a ratio measured within this run."""
    r = results.get("results", {})
    cfg = results.get("config", {})
    t = Targets()

    # 1. No-op jobs against the bare-table floor
    for slots, share in FLOOR_SHARES:
        t.add(
            f"1. no-op jobs, one dispatcher, {slots} slots, against the bare-table floor at batch {slots}",
            *floor_share(r, cfg, slots, share),
        )

    # 2. Jobs that do a little work: stamp, 4 slots, against the best peer (its default or concurrency 4)
    st = r.get("stamp", {})
    ours = st.get("ours/pg/slots=4")
    o = med((ours or {}).get("jobs_per_s"))
    best, peer, entry = best_peer(st, lambda e: med(e.get("jobs_per_s")), ("/default", "/c4"))
    req = "≥ 7x the best peer"
    name = "2. `stamp` jobs (one INSERT each), one dispatcher, 4 slots, against the best peer"
    if o and best:
        # Every job must have done its work: the fewest stamps of any repetition, against N.
        stamped = {k: min(x.get("stamped", 0) for x in v["reps"]) for k, v in st.items()}
        unstamped = [f"{k} {stamped[k]}/{v.get('n')}" for k, v in st.items() if stamped[k] < v.get("n", 0)]
        missing = f"; **stamps missing**: {', '.join(unstamped)}" if unstamped else ""
        t.add(
            name,
            req,
            (
                f"this project {fmt(o)} jobs/s; best peer ({LABEL[peer]}, {entry.get('label')}) "
                f"{fmt(best)} jobs/s{missing}",
                f"{o / best:.2f}x",
                o >= 7 * best and not unstamped,
            ),
        )
    else:
        t.add(name, req)

    # 3. Queue limits that never bind, against no limits (4 slots)
    lim = r.get("limits", {})
    base = med((lim.get("pg/throughput/no limits") or {}).get("jobs_per_s"))
    limited = {"concurrency_limit 1,000 + rate_limit 10,000 / s": lim.get("pg/throughput/both")}
    keyed = {k.split("/", 2)[2]: v for k, v in lim.items() if k.startswith("pg/throughput/keyed")}
    limited |= keyed or {"keyed limits": None}
    for label, entry in limited.items():
        v = med((entry or {}).get("jobs_per_s"))
        t.add(
            f"3. 4 slots, a queue with limits that never bind, against one without limits: {label}",
            "loses ≤ 15 %",
            (f"no limits {fmt(base)} jobs/s; {label} {fmt(v)} jobs/s", loss(v, base), v >= 0.85 * base)
            if v and base
            else None,
        )

    # 4. Pickup and lateness (kept from issue #15)
    t.add("4. pickup p50, from before `task.enqueue()` to the job's first statement", *pickup(r, "p50", 3.0))
    for busy in (True, False):
        name, req, result = lateness(r, cfg, busy, "p99", 5.0)
        t.add(f"4. {name}", req, result)

    # 5. Dispatcher processes
    t.add("5. `rundispatcher --processes 2` against 1, `--concurrency 16` each", *processes_gain(r))

    # 6. Enqueue against the best peer: one by one (autocommit, one transaction) and in bulk
    t.add(
        "6. enqueue one by one, autocommit: `task.enqueue()` against the peers' calls",
        *against_best_peer(r, "enqueue_per_s", lambda e: med(e.get("enqueue_per_s"))),
    )
    t.add(
        "6. enqueue one by one, a loop in one `transaction.atomic()`",
        *against_best_peer(r, "in_tx_per_s", lambda e: med(e.get("in_tx_per_s")), what="'s same loop"),
    )
    t.add(
        f"6. enqueue in bulk: `enqueue_many()`, {fmt(cfg.get('enqueue_many_batch', 1000))} jobs per call",
        *against_best_peer(
            r,
            "enqueue_many_per_s",
            peer_bulk,
            how=peer_bulk_how,
            what="'s bulk call, as many per call (a peer without one: its loop in one transaction)",
        ),
    )

    # 7. Several dispatchers
    scl = r.get("scaling", {})
    one, four = scl.get("1"), scl.get("4")
    a, b = med((one or {}).get("jobs_per_s")), med((four or {}).get("jobs_per_s"))

    def claims(v):
        return f"short claims {fmt(med(v.get('short_pct')), 1)} % of {fmt(med(v.get('claims')))} claims"

    t.add(
        "7. 4 dispatchers of 4 slots against one of 4 slots (short claims reported)",
        "≥ 1.8x",
        (
            f"1 dispatcher {fmt(a)} jobs/s, {claims(one)}; 4 dispatchers {fmt(b)} jobs/s, {claims(four)}",
            f"{b / a:.2f}x",
            b >= 1.8 * a,
        )
        if a and b
        else None,
    )

    return t.render("Targets (issue #28, PostgreSQL)")


NEW_FLOOR_SHARES = ((4, 0.60), (16, 0.50), (64, 0.40))  # issue #37: no-op jobs against the bare-table floor


def stamp_rate(entry):
    return med((entry or {}).get("jobs_per_s"))


def ours_best_stamp(st):
    """(rate, label) of this project's best ``stamp`` configuration, or (None, None)."""
    found = [(stamp_rate(v), v.get("label", k)) for k, v in st.items() if k.startswith("ours/pg/")]
    found = [x for x in found if x[0]]
    return max(found) if found else (None, None)


def stamp_against(st, ours, ours_label, peer_key, need):
    """This project's ``stamp`` rate against one peer configuration's: ≥ ``need``x; None when either is missing.
    A configuration that did not write every stamp (the work not done) does not meet its target."""
    entry = st.get(peer_key)
    p = stamp_rate(entry)
    if not (ours and p):
        return None
    lost = min(x.get("stamped", 0) for x in entry["reps"]) < entry.get("n", 0)
    return (
        f"this project ({ours_label}) {fmt(ours)} jobs/s; {entry.get('label')} {fmt(p)} jobs/s"
        + ("; **stamps missing**" if lost else ""),
        f"{ours / p:.2f}x",
        ours >= need * p and not lost,
    )


def targets_37(results):
    """The Targets table of issue #37: the new peers, the I/O-bound async scenario and the floor shares."""
    r = results.get("results", {})
    cfg = results.get("config", {})
    t = Targets()
    st = r.get("stamp", {})

    # 1. Stamp jobs: our best configuration against pgqueuer's and oban's documented defaults
    best, best_label = ours_best_stamp(st)
    for peer, need, how in (("pgqueuer", 1.5, "at its defaults (`pgq run`)"), ("oban", 3.0, "at `default:10`")):
        t.add(
            f"1. `stamp` jobs (one INSERT each), this project's best configuration against {LABEL[peer]} {how}",
            f"≥ {need}x",
            stamp_against(st, best, best_label, f"{peer}/pg/default", need),
        )

    # 2. The same concurrency (4) against every peer
    ours4 = stamp_rate(st.get("ours/pg/slots=4"))
    for peer in PEERS + NEW_PEERS:
        t.add(
            f"2. `stamp` jobs at concurrency 4: this project (4 slots) against {LABEL[peer]} at 4",
            "≥ 2x",
            stamp_against(st, ours4, "4 slots", f"{peer}/pg/c4", 2.0),
        )

    # 3. I/O-bound async jobs
    io = r.get("io", {})
    ours_io = next((v for k, v in io.items() if k.startswith("ours/")), None)
    pgq = io.get("pgqueuer/pg/default")
    name = f"3. I/O-bound async jobs (`await asyncio.sleep(0.05)`, {fmt(cfg.get('io_n'))}), this project's async queue at 200 against pgqueuer at its defaults"
    if ours_io and ours_io.get("unavailable"):
        t.rows.append([name, f"not available: {ours_io['unavailable']}", "≥ 1.5x", "-", "not available"])
    else:
        o, p = stamp_rate(ours_io), stamp_rate(pgq)
        t.add(
            name,
            "≥ 1.5x",
            (f"this project {fmt(o)} jobs/s; pgqueuer {fmt(p)} jobs/s", f"{o / p:.2f}x", o >= 1.5 * p)
            if o and p
            else None,
        )

    # 4. No-op jobs against the bare-table floor
    for slots, share in NEW_FLOOR_SHARES:
        t.add(
            f"4. no-op jobs, one dispatcher, {slots} slots, against the bare-table floor at batch {slots}",
            *floor_share(r, cfg, slots, share),
        )

    # 5. Pickup, lateness, processes, limits that never bind (measured as for issue #28)
    t.add("5. pickup p50, from before `task.enqueue()` to the job's first statement", *pickup(r, "p50", 3.0))
    for busy in (True, False):
        name, req, result = lateness(r, cfg, busy, "p99", 5.0)
        t.add(f"5. {name}", req, result)
    t.add("5. `rundispatcher --processes 2` against 1, `--concurrency 16` each", *processes_gain(r))
    for label, entry, base in limit_rows(r):
        v = med((entry or {}).get("jobs_per_s"))
        t.add(
            f"5. 4 slots, a queue with limits that never bind, against one without limits: {label}",
            "≥ 85 % of the unlimited rate",
            (f"no limits {fmt(base)} jobs/s; {label} {fmt(v)} jobs/s", f"{100 * v / base:.0f} %", v >= 0.85 * base)
            if v and base
            else None,
        )
    return t.render("Targets (issue #37, PostgreSQL)")


def limit_rows(r):
    """(label, entry, unlimited rate) of each limited variant of ``limits`` (keyed ones when measured)."""
    lim = r.get("limits", {})
    base = med((lim.get("pg/throughput/no limits") or {}).get("jobs_per_s"))
    limited = {"concurrency_limit 1,000 + rate_limit 10,000 / s": lim.get("pg/throughput/both")}
    keyed = {k.split("/", 2)[2]: v for k, v in lim.items() if k.startswith("pg/throughput/keyed")}
    limited |= keyed or {"keyed limits": None}
    return [(label, entry, base) for label, entry in limited.items()]


def io_table(results):
    io = results.get("results", {}).get("io", {})
    if not io:
        return ""
    rows = []
    for key, v in io.items():
        name = key.split("/")[0]
        rows.append(
            [
                LABEL[name],
                v.get("label", ""),
                fmt(v.get("n")),
                "not available: " + v["unavailable"] if v.get("unavailable") else ms(v["jobs_per_s"], 0),
                "-" if v.get("unavailable") else ms(v["jobs_per_s_wall"], 0),
                len(v.get("reps", [])),
                "" if v.get("complete") or v.get("unavailable") else "**incomplete (timeout)**",
            ]
        )
    return (
        "### I/O-bound async jobs: `await asyncio.sleep(0.05)` (PostgreSQL)\n\n"
        + table(
            [
                "subject",
                "configuration",
                "N",
                "jobs/s (first start → last finish)",
                "jobs/s (spawn → last finish)",
                "reps",
                "",
            ],
            rows,
        )
        + "\n\nN due jobs whose task only awaits `asyncio.sleep(0.05)`, enqueued before the workers start: this "
        "project's `bench.benchapp.tasks.io_sleep` on the queue `io` served by `rundispatcher --queue io:200:async`, "
        "pgqueuer's `io` entrypoint under `pgq run` at its defaults. The configurations alternate within each "
        'repetition. "not available": this project\'s dispatcher refused the async queue, its backend the task, or '
        "not every job succeeded.\n"
    )


def render(results):
    r = results.get("results", {})
    m = results.get("machine", {})
    cfg = results.get("config", {})
    reps = cfg.get("reps", "?")
    parts = []
    parts.append(
        f"Run {results.get('started', '?')} UTC, {fmt((results.get('total_s') or 0) / 60, 1)} min, "
        f"{reps} repetitions unless a table says otherwise; cells are **median (min–max)**.\n"
    )
    parts.append("Command:\n\n```\n" + results.get("command", "") + "\n```\n")
    lines = [f"- {x}" for x in m.get("lscpu", [])]
    lines += [
        f"- code measured: {m.get('git', '?')} (the working tree is shared with other engineers)",
        f"- nproc {m.get('nproc')}, memory {m.get('memory_gb')} GiB, kernel {m.get('kernel')}",
        f"- PostgreSQL {m.get('postgresql')} on the same machine ({', '.join(f'{k}={v}' for k, v in (m.get('pg_settings') or {}).items())})",
        f"- Python {m.get('python')} (this project), {m.get('peers_python')} (peers, bench/.venv-peers); SQLite {m.get('sqlite')}",
        f"- load average at start {tuple(round(x, 2) for x in m.get('loadavg_start', ()))}, at end "
        f"{tuple(round(x, 2) for x in m.get('loadavg_end', ()))} (other engineers' test suites share the 2 cores)",
    ]
    parts.append("Machine:\n\n" + "\n".join(lines) + "\n")
    parts.append(targets_37(results))
    parts.append(targets_28(results))
    parts.append(targets(results))

    floor, floor_project = floor_tables(r)
    tp = r.get("throughput", {})
    prec = r.get("precision", {})
    pick = r.get("pickup", {})

    # -- summary against the table
    if tp or prec or pick:
        rows = []
        for name in ("ours", "dtdb", "procrastinate", "djangoq"):
            if name == "ours":
                key = next((k for k in tp.get("ours", {}) if k.startswith("pg/") and k.endswith("slots=4")), None)
                d = ms(tp["ours"][key]["jobs_per_s"], 0) if key else "-"
                c4 = "(same: 4 slots)"
                pk = pick.get("ours/pg/orm", {})
            else:
                d = ms(tp.get("peers", {}).get(f"{name}/pg/default", {}).get("jobs_per_s"), 0)
                c4 = ms(tp.get("peers", {}).get(f"{name}/pg/c4", {}).get("jobs_per_s"), 0)
                pk = pick.get(f"{name}/pg/enqueue", {})
            p = prec.get(f"{name}/pg", {})
            after = f" ({fmt(med(pk['after_p50']), 1)} from return)" if "after_p50" in pk else ""
            rows.append(
                [
                    LABEL[name],
                    d,
                    c4,
                    f"{fmt(med(p.get('p50')), 1)} / {fmt(med(p.get('p99')), 1)} ms",
                    f"{fmt(med(pk.get('p50')), 1)} ms{after}",
                ]
            )
        parts.append(
            "### Summary (PostgreSQL)\n\n"
            + table(["subject", "jobs/s (default)", "jobs/s (concurrency 4)", "lateness p50 / p99", "pickup p50"], rows)
            + "\n\nThroughput here is first job start to last job finish (the per-run tables also give it "
            "from process spawn). Ours at N = 5,000 with 4 slots; peers at the N in their table.\n"
        )

    # -- floor
    if floor or floor_project:
        batches = list(dict.fromkeys([*floor, *floor_project]))
        rows = []
        for b in batches:
            v, pv = floor.get(b, {}), floor_project.get(b, {})
            rows.append(
                [
                    b,
                    fmt(v.get("n") or pv.get("n")),
                    ms(v.get("jobs_per_s"), 0),
                    ms(pv.get("jobs_per_s"), 0),
                    f"{100 * med(pv['jobs_per_s']) / med(v['jobs_per_s']):.0f} %"
                    if med(v.get("jobs_per_s")) and med(pv.get("jobs_per_s"))
                    else "-",
                ]
            )
        parts.append(
            "### The floor: raw psycopg claim (CTE + SKIP LOCKED) + one finishing UPDATE\n\n"
            + table(
                [
                    "batch",
                    "jobs per run",
                    "jobs/s, bare table (claim index only): the targets' floor",
                    "jobs/s, project table, all indexes",
                    "project / bare",
                ],
                rows,
            )
            + "\n\nThe bare table (`bench_floor_job`) has the job row's columns, a primary key and one index, "
            "`(priority DESC, execute_at, id) WHERE status = 'pending'`; the project table is this project's "
            "migrated `scheduler_app_job` with every index and constraint it has.\n"
        )

    # -- throughput: ours
    if tp.get("ours"):
        rows = []
        for key, v in tp["ours"].items():
            kind, n, slots = key.split("/")
            n, slots = int(n[2:]), int(slots[6:])
            f = (floor or floor_project).get(str(slots), {}).get("jobs_per_s") if kind == "pg" else None
            frac = f"{100 * med(v['jobs_per_s']) / med(f):.0f} %" if f and med(f) and med(v["jobs_per_s"]) else "-"
            rows.append(
                [
                    DBL[kind],
                    fmt(n),
                    slots,
                    ms(v["jobs_per_s"], 0),
                    ms(v["jobs_per_s_wall"], 0),
                    ms(f, 0) if f else "-",
                    frac,
                    len(v["reps"]),
                    "" if v["complete"] else "**incomplete (timeout)**",
                ]
            )
        parts.append(
            "### Throughput: this project (no-op jobs, all due before the dispatcher starts; one dispatcher)\n\n"
            + table(
                [
                    "database",
                    "N",
                    "slots",
                    "jobs/s (first start → last finish)",
                    "jobs/s (spawn → last finish)",
                    "floor jobs/s, batch = slots" + (" (bare table)" if floor else " (project table)"),
                    "of floor",
                    "reps",
                    "",
                ],
                rows,
            )
            + "\n"
        )
    if tp.get("peers"):
        rows = []
        for key, v in tp["peers"].items():
            name, kind, variant = key.split("/")
            rows.append(
                [
                    LABEL[name],
                    DBL[kind],
                    v.get("label", variant),
                    fmt(v["reps"][0]["n"]),
                    ms(v["jobs_per_s"], 0),
                    ms(v["jobs_per_s_wall"], 0),
                    len(v["reps"]),
                    "" if v["complete"] else "**incomplete (timeout)**",
                ]
            )
        parts.append(
            "### Throughput: peers (their own worker commands, default settings and concurrency 4)\n\n"
            + table(
                [
                    "peer",
                    "database",
                    "configuration",
                    "N",
                    "jobs/s (first start → last finish)",
                    "jobs/s (spawn → last finish)",
                    "reps",
                    "",
                ],
                rows,
            )
            + "\n"
        )
        best = max((med(v["jobs_per_s"]) or 0 for k, v in tp["peers"].items() if "/pg/" in k), default=0)
        ours = [
            med(v["jobs_per_s"]) for k, v in tp.get("ours", {}).items() if k.startswith("pg/") and k.endswith("slots=4")
        ]
        if best and ours and ours[0]:
            parts.append(
                f"Best peer on PostgreSQL: {fmt(best)} jobs/s; this project with 4 slots: {fmt(ours[0])} jobs/s "
                f"= **{ours[0] / best:.2f}x** (target >= 3x and >= 3,000 jobs/s).\n"
            )

    # -- jobs that do a little work
    st = r.get("stamp", {})
    if st:
        rows = []
        for key, v in st.items():
            name = key.split("/")[0]
            stamped = min(x.get("stamped", 0) for x in v["reps"])
            rows.append(
                [
                    LABEL[name],
                    v.get("label", ""),
                    fmt(v.get("n")),
                    ms(v["jobs_per_s"], 0),
                    ms(v["jobs_per_s_wall"], 0),
                    f"{fmt(stamped)}/{fmt(v.get('n'))}",
                    claims_cell(v),
                    len(v["reps"]),
                    "" if v["complete"] else "**incomplete (timeout)**",
                ]
            )
        parts.append(
            "### Throughput: jobs that do a little work (`stamp`: one INSERT each; PostgreSQL)\n\n"
            + table(
                [
                    "subject",
                    "configuration",
                    "N",
                    "jobs/s (first start → last finish)",
                    "jobs/s (spawn → last finish)",
                    "stamps written (worst rep)",
                    "claim → start ms p50 / p99 / max",
                    "reps",
                    "",
                ],
                rows,
            )
            + "\n\nN due `stamp(key, due)` jobs (bench/stamps.py: `time.time()`, then one INSERT into `bench_stamp` "
            "on the worker's own connection; the peers that are not Django apps: bench/peers/pgstamp.py, the same "
            "INSERT on a connection of the worker process), enqueued before the workers start; this project with one "
            "dispatcher of 4 and of 16 slots, the peers with their own worker commands at their default and at "
            "concurrency 4 (DBOS: concurrency 4 only; it and chancy at its guide's setting drain a backlog a few jobs "
            "a second, so their N is small; their rates count from each peer's own start and finish columns). The "
            "configurations alternate within each repetition; `bench_stamp` is emptied before and after each run. "
            "Claim → start (this project): from the claim's time (the job's `last_attempted_at`, the time the rate "
            "limit counts) to the task's first statement (its stamp), per job; p50, p99 and max of a run, median of "
            "the repetitions.\n"
        )

    # -- log levels, per-job log line
    lg = r.get("logging", {})
    if lg:
        base = med(lg.get("warning", {}).get("jobs_per_s"))
        rows = [
            [
                ("unset (the settings' default, INFO)" if v.get("log_level") is None else v["log_level"]),
                ms(v["jobs_per_s"], 0),
                ms(v["jobs_per_s_wall"], 0),
                f"{100 * med(v['jobs_per_s']) / base:.0f} %" if base and med(v["jobs_per_s"]) else "-",
                len(v["reps"]),
                "" if v["complete"] else "**incomplete (timeout)**",
            ]
            for k, v in lg.items()
        ]
        parts.append(
            f"### Log level: one dispatcher, 4 slots, N = {fmt(cfg.get('log_n'))} no-op jobs\n\n"
            + table(
                [
                    "SCHEDULER_LOG_LEVEL",
                    "jobs/s (first start → last finish)",
                    "jobs/s (spawn → last finish)",
                    "of WARNING",
                    "reps",
                    "",
                ],
                rows,
            )
            + "\n\nThe variants alternate within each repetition. At the default level the dispatcher logs a start "
            "and an end line per job to stderr (a file under bench/results/logs here).\n"
        )
    jl = r.get("joblog", {})
    if jl:
        rows = []
        labels = {
            "default": "unset (default)",
            "warning": "WARNING",
            "no-capture": "unset; log capture off (`JOB_LOG_MAX_RECORDS=0`)",
            "no-rollups": "unset; rollups off (`ROLLUP_INTERVAL=0`)",
        }
        for k, v in jl.items():
            task, level = k.split("/")
            # The capture and rollup variants compare with the same task at the default level.
            base = med(
                jl.get(
                    f"{task if level in ('no-capture', 'no-rollups') else 'noop'}/"
                    f"{'default' if level in ('no-capture', 'no-rollups') else level}",
                    {},
                ).get("jobs_per_s")
            )
            rows.append(
                [
                    f"`{task}`",
                    labels.get(level, level),
                    ms(v["jobs_per_s"], 0),
                    f"{100 * med(v['jobs_per_s']) / base:.0f} %" if base and med(v["jobs_per_s"]) else "-",
                    len(v["reps"]),
                    "" if v["complete"] else "**incomplete (timeout)**",
                ]
            )
        parts.append(
            f"### Per-job log line: one dispatcher, 4 slots, N = {fmt(cfg.get('log_n'))} jobs\n\n"
            + table(
                [
                    "task (bench.benchapp.tasks)",
                    "SCHEDULER_LOG_LEVEL",
                    "jobs/s (first start → last finish)",
                    "of noop, same level (capture/rollups off: of the same task with them on)",
                    "reps",
                    "",
                ],
                rows,
            )
            + "\n\n`log_one` is a no-op that calls `logging.getLogger(__name__).info(...)` once; `noop` is the "
            "no-op from the same module. The variants alternate within each repetition. Capture off shows "
            "what keeping a job's log lines costs; rollups off what the per-minute rollups cost.\n"
        )

    # -- precision
    prec_busy = r.get("precision_busy", {})
    if prec or prec_busy:
        rows = []
        entries = [(k, v, "idle (4 slots)" if k.startswith("ours/") else "idle") for k, v in prec.items()]
        entries += [
            (
                k,
                v,
                f"{v.get('busy')} of {v.get('slots')} slots busy (sleeping jobs; running at the first "
                f"stamp: {', '.join(str(x) for x in v.get('busy_running', []))})",
            )
            for k, v in prec_busy.items()
        ]
        for key, v, cond in entries:
            name, kind = key.split("/")
            ran = v.get("ran", [])
            rows.append(
                [
                    LABEL[name],
                    DBL[kind],
                    cond,
                    ms(v["p50"]),
                    ms(v["p95"]),
                    ms(v["p99"]),
                    ms(v["max"]),
                    ms(v["min"]),
                    claims_cell(v),
                    f"{min(ran) if ran else 0}/{v.get('expected')}",
                    len(v.get("reps", [])),
                ]
            )
        parts.append(
            "### Timing precision: lateness = job's own start − execute_at, ms "
            f"({fmt(cfg.get('prec_n', 200))} jobs spread over {fmt(cfg.get('prec_spread', 10))} s, the "
            "first 3 s ahead, worker already running)\n\n"
            + table(
                [
                    "subject",
                    "database",
                    "slots",
                    "p50",
                    "p95",
                    "p99",
                    "max",
                    "min",
                    "claim → start p50 / p99 / max",
                    "ran (worst rep)",
                    "reps",
                ],
                rows,
            )
            + "\n\nClaim → start (this project): from the claim's time (the job's `last_attempted_at`, the "
            "time its queue's rate limit counts) to the task's first statement; a run's p50, p99 and max, "
            "median of the repetitions. The rate limit holds at claims: starts follow them by this delay "
            "(docs/LIMITS.md).\n"
        )

    # -- pickup
    if pick:
        rows = []
        via_label = {
            "orm": "`task.enqueue()` from another process",
            "api": "REST API POST /api/jobs/",
            "inproc": "`task.enqueue()` inside a running job (same process)",
            "enqueue": "its enqueue API",
        }
        for key, v in pick.items():
            name, kind, via = key.split("/")
            missing = sum(x.get("missing", 0) for x in v.get("reps", []))
            rows.append(
                [
                    LABEL[name],
                    DBL[kind],
                    via_label[via],
                    ms(v["p50"]),
                    ms(v["p99"]),
                    ms(v["max"]),
                    ms(v["after_p50"]) if "after_p50" in v else "-",
                    ms(v["after_p99"]) if "after_p99" in v else "-",
                    missing or "",
                ]
            )
        parts.append(
            f"### Pickup latency: idle worker, one due-now job at a time, ms "
            f"({cfg.get('pickup_n', 50)} jobs per row)\n\n"
            "From the moment before the enqueue call to the job's own start (p50, p99, max), and from "
            "the moment the enqueue call returned, its transaction committed (from return).\n\n"
            + table(
                [
                    "subject",
                    "database",
                    "enqueued through",
                    "p50",
                    "p99",
                    "max",
                    "p50 from return",
                    "p99 from return",
                    "missing",
                ],
                rows,
            )
            + "\n"
        )

    # -- memory
    mem = r.get("memory", {})
    if mem:
        rows = [
            [
                DBL[k],
                fmt(v["idle_mb"], 1),
                fmt(v["future_mb"], 1),
                f"+{fmt(v['future_growth_mb'], 1)}",
                fmt(v["due_mb"], 1),
                f"+{fmt(v['due_growth_mb'], 1)}",
                fmt(v.get("due_remaining")),
            ]
            for k, v in mem.items()
        ]
        parts.append(
            "### Memory: dispatcher RSS (psutil), MB, one run each\n\n"
            + table(
                [
                    "database",
                    "idle",
                    f"{fmt(cfg.get('mem_future'))} future pending",
                    "growth",
                    f"{fmt(cfg.get('mem_due'))} due, 4 slots (peak)",
                    "growth",
                    "due jobs left when sampling stopped",
                ],
                rows,
            )
            + f"\n\nFuture jobs are due from now + 240 s, 5 ms apart (the 300 s window holds more than the heap cap). "
            f"The due run is sampled every 0.5 s for up to {cfg.get('mem_due_seconds')} s.\n"
        )

    # -- scale
    sc = r.get("scale", {})
    if sc:
        names = list(next(iter(sc.values()))["queries"].keys())
        rows = []
        for size, v in sc.items():
            rows.append(
                [fmt(int(size))]
                + [f"{fmt(v['queries'][q]['ms']['median'], 2)} / {fmt(v['queries'][q]['p99'], 2)}" for q in names]
                + [ms(v["throughput"]["jobs_per_s"], 0)]
            )
        parts.append(
            "### Scale: hot queries with finished rows in the table (PostgreSQL), ms median / p99 of 30, "
            "and throughput (N = "
            + fmt(cfg.get("scale_n"))
            + ", 4 slots)\n\n"
            + table(["finished rows"] + names + ["jobs/s"], rows)
            + "\n\nThe raw statements run with 1,000 due pending rows present (the claim is rolled back); "
            "`store.*` are the dispatcher's own calls, ORM included.\n"
        )
        for size, v in sc.items():
            plans = "\n\n".join(f"{q}:\n{v['queries'][q]['plan']}" for q in names if v["queries"][q]["plan"])
            parts.append(
                f"<details><summary>EXPLAIN (ANALYZE, BUFFERS) with {fmt(int(size))} finished rows</summary>\n\n"
                f"```\n{plans}\n```\n</details>\n"
            )

    # -- enqueue
    enq = r.get("enqueue", {})
    if enq:
        rows = []
        for key, v in enq.items():
            name, kind = key.split("/")
            label = "floor: raw psycopg INSERT + NOTIFY, bare table" if name == "floor" else LABEL[name]
            rows.append(
                [
                    label,
                    DBL[kind],
                    ms(v["enqueue_per_s"], 0),
                    ms(v.get("in_tx_per_s"), 0),
                    ms(v.get("enqueue_many_per_s") or v.get("bulk_per_s"), 0),
                    ms(v.get("enqueue_many_one_call_per_s"), 0),
                    ms(v.get("api_bulk_per_s"), 0),
                    ms(v.get("api_single_p50_ms")),
                    ms(v.get("api_single_p99_ms")),
                ]
            )
        n_many = cfg.get("enqueue_many_batch", 1000) * cfg.get("enqueue_many_calls", 0)
        parts.append(
            "### Enqueue: one at a time through the task API (autocommit, and a loop in one "
            "`transaction.atomic()`), `enqueue_many()`, and through the REST API "
            "(Django's threaded dev server, one client)\n\n"
            + table(
                [
                    "subject",
                    "database",
                    "task.enqueue() / defer() / async_task() per s, autocommit",
                    "the same, a loop in one transaction.atomic(), per s",
                    f"bulk call jobs/s, {fmt(cfg.get('enqueue_many_batch', 1000))} per call "
                    "(`enqueue_many()`; procrastinate `batch_defer()`)",
                    f"enqueue_many() jobs/s ({fmt(n_many)} in one call)",
                    "bulk API jobs/s (1,000 per request)",
                    "single API create p50 ms",
                    "p99 ms",
                ],
                rows,
            )
            + f"\n\n{fmt(cfg.get('enqueue_n'))} calls per loop after {cfg.get('enqueue_warmup', 0)} warm-up "
            "calls. The floor sends one statement per job (a CTE that inserts a job-like row and calls "
            "`pg_notify` with its id) with psycopg's prepared statements, first one commit per job, then "
            "all in one transaction. Of the peers only procrastinate has a bulk call (`batch_defer()`); "
            "django-tasks-db and django-q2 enqueue one at a time.\n"
        )

    if r.get("io"):
        parts.append(io_table(results))

    scl = r.get("scaling", {})
    if scl:
        parts.append(
            "### Several dispatchers on one PostgreSQL\n\n" + scaling_table(results) + "\n\nSee docs/SCALING.md.\n"
        )
    if r.get("processes"):
        parts.append(
            "### `rundispatcher --processes N` (one supervisor, N dispatcher processes)\n\n"
            + processes_table(results)
            + "\n\nSee docs/SCALING.md.\n"
        )
    import flow_bench  # bench/flow_bench.py
    import keys_bench  # bench/keys_bench.py
    import workflows_bench  # bench/workflows_bench.py

    for script in (flow_bench, workflows_bench, keys_bench):
        text = script.render(results, table=table, ms=ms, fmt=fmt)
        if text:
            parts.append(text)
    return "\n".join(parts)


def processes_table(results):
    cfg = results.get("config", {})
    pr = results.get("results", {}).get("processes", {})
    rows = []
    for v in pr.values():
        one = med(pr.get(f"1/{v['slots']}", {}).get("jobs_per_s"))
        rows.append(
            [
                v["processes"],
                v["slots"],
                fmt(v["processes"] * v["slots"]),
                ms(v["jobs_per_s"], 0),
                f"{med(v['jobs_per_s']) / one:.2f}x" if one and med(v["jobs_per_s"]) else "-",
                ms(v.get("ready_s"), 1),
                len(v["reps"]),
                "" if v["complete"] else "**incomplete (timeout)**",
            ]
        )
    return (
        f"`rundispatcher --processes P --concurrency S` (P = 1: the command is the dispatcher itself). Once all "
        f"P dispatchers are registered, N = {fmt(cfg.get('proc_n'))} due no-op jobs are enqueued in one "
        f"transaction (`enqueue_many`); jobs/s = N / (first job's start → last job's finish). "
        f"{cfg.get('reps')} repetitions, the configurations alternating within each.\n\n"
        + table(
            [
                "processes",
                "slots each",
                "slots",
                "jobs/s (first start → last finish)",
                "x one process, same slots",
                "all registered after spawn, s",
                "reps",
                "",
            ],
            rows,
        )
    )


def scaling_table(results):
    cfg = results.get("config", {})
    scl = results.get("results", {}).get("scaling", {})
    rows = []
    for count, v in scl.items():
        rows.append(
            [
                count,
                fmt(int(count) * 4),
                ms(v["jobs_per_s"], 0),
                ms(v["jobs_per_s_wall"], 0),
                ms(v["claims"], 0),
                ms(v["short"], 0),
                ms(v["empty"], 0),
                ms(v["short_pct"], 1),
                ms(v["rows_per_claim"], 2),
            ]
        )
    return (
        f"N = {fmt(cfg.get('scaling_n'))} due no-op jobs, each dispatcher 4 slots, {cfg.get('reps')} repetitions.\n\n"
        + table(
            [
                "dispatchers",
                "slots",
                "jobs/s (first start → last finish)",
                "jobs/s (spawn → last finish)",
                "claim statements",
                "short claims (< asked)",
                "empty claims",
                "short %",
                "rows per claim",
            ],
            rows,
        )
    )


def replace_between(path, start, end, body, header):
    text = Path(path).read_text() if os.path.exists(path) else header + f"\n{start}\n{end}\n"
    if start not in text:
        text += f"\n{start}\n{end}\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)
    with open(path, "w") as f:
        f.write(text)


def section(path, start, end):
    """The text between two markers of a file, or None."""
    if not os.path.exists(path):
        return None
    m = re.search(re.escape(start) + "\n?(.*?)\n?" + re.escape(end), Path(path).read_text(), re.S)
    return m.group(1) if m else None


PROC_START, PROC_END = "<!-- bench:processes:start -->", "<!-- bench:processes:end -->"


def write_docs(results, text):
    replace_between(
        os.path.join(ROOT, "docs", "BENCHMARKS.md"),
        "<!-- bench:start -->",
        "<!-- bench:end -->",
        text,
        "# Benchmarks\n\nGenerated by `make bench` (bench/run.py) between the markers below.\n",
    )
    res = results.get("results", {})
    if res.get("scaling") or res.get("processes"):
        # SCALING.md's generated section holds the scaling table and, between markers of its own,
        # the --processes table; a run that measured only one of them keeps the other as it was.
        path = os.path.join(ROOT, "docs", "SCALING.md")
        start, end = "<!-- bench:scaling:start -->", "<!-- bench:scaling:end -->"
        current = section(path, start, end) or ""
        old_scaling = current.split(PROC_START)[0].strip()
        old_processes = section(path, PROC_START, PROC_END)
        scaling = scaling_table(results) if res.get("scaling") else old_scaling
        processes = processes_table(results) if res.get("processes") else old_processes
        body = scaling
        if processes:
            body += ("\n\n" if body else "") + f"{PROC_START}\n{processes}\n{PROC_END}"
        replace_between(path, start, end, body, "# Scaling past one machine\n")
