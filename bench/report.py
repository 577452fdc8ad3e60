"""Render a results dict (bench/run.py) as Markdown; write the generated parts of the docs."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABEL = {
    "ours": "**this project**",
    "dtdb": "django-tasks-db 0.13.0",
    "procrastinate": "procrastinate 3.10.0",
    "djangoq": "django-q2 1.11.1 (ORM broker)",
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


def render(results):
    r = results.get("results", {})
    m = results.get("machine", {})
    cfg = results.get("config", {})
    reps = cfg.get("reps", "?")
    parts = []
    parts.append(f"Run {results.get('started', '?')} UTC, {fmt((results.get('total_s') or 0) / 60, 1)} min, "
                 f"{reps} repetitions unless a table says otherwise; cells are **median (min–max)**.\n")
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

    floor = r.get("floor", {})
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
            rows.append([LABEL[name], d, c4, f"{fmt(med(p.get('p50')), 1)} / {fmt(med(p.get('p99')), 1)} ms",
                         f"{fmt(med(pk.get('p50')), 1)} ms{after}"])
        parts.append("### Summary (PostgreSQL)\n\n" + table(
            ["subject", "jobs/s (default)", "jobs/s (concurrency 4)", "lateness p50 / p99", "pickup p50"], rows) +
            "\n\nThroughput here is first job start to last job finish (the per-run tables also give it "
            "from process spawn). Ours at N = 5,000 with 4 slots; peers at the N in their table.\n")

    # -- floor
    if floor:
        rows = [[b, fmt(v["n"]), ms(v["jobs_per_s"], 0)] for b, v in floor.items()]
        parts.append("### The floor: raw psycopg claim (CTE + SKIP LOCKED) + one finishing UPDATE\n\n" + table(
            ["batch", "jobs per run", "jobs/s"], rows) + "\n")

    # -- throughput: ours
    if tp.get("ours"):
        rows = []
        for key, v in tp["ours"].items():
            kind, n, slots = key.split("/")
            n, slots = int(n[2:]), int(slots[6:])
            f = floor.get(str(slots), {}).get("jobs_per_s") if kind == "pg" else None
            frac = (f"{100 * med(v['jobs_per_s']) / med(f):.0f} %"
                    if f and med(f) and med(v["jobs_per_s"]) else "-")
            rows.append([DBL[kind], fmt(n), slots, ms(v["jobs_per_s"], 0), ms(v["jobs_per_s_wall"], 0),
                         ms(f, 0) if f else "-", frac, len(v["reps"]),
                         "" if v["complete"] else "**incomplete (timeout)**"])
        parts.append("### Throughput: this project (no-op jobs, all due before the dispatcher starts; one dispatcher)\n\n"
                     + table(["database", "N", "slots", "jobs/s (first start → last finish)",
                              "jobs/s (spawn → last finish)", "floor jobs/s, batch = slots", "of floor", "reps", ""],
                             rows) + "\n")
    if tp.get("peers"):
        rows = []
        for key, v in tp["peers"].items():
            name, kind, variant = key.split("/")
            rows.append([LABEL[name], DBL[kind], v.get("label", variant), fmt(v["reps"][0]["n"]),
                         ms(v["jobs_per_s"], 0), ms(v["jobs_per_s_wall"], 0), len(v["reps"]),
                         "" if v["complete"] else "**incomplete (timeout)**"])
        parts.append("### Throughput: peers (their own worker commands, default settings and concurrency 4)\n\n" +
                     table(["peer", "database", "configuration", "N", "jobs/s (first start → last finish)",
                            "jobs/s (spawn → last finish)", "reps", ""], rows) + "\n")
        best = max((med(v["jobs_per_s"]) or 0 for k, v in tp["peers"].items() if "/pg/" in k), default=0)
        ours = [med(v["jobs_per_s"]) for k, v in tp.get("ours", {}).items() if k.startswith("pg/") and k.endswith("slots=4")]
        if best and ours and ours[0]:
            parts.append(f"Best peer on PostgreSQL: {fmt(best)} jobs/s; this project with 4 slots: {fmt(ours[0])} jobs/s "
                         f"= **{ours[0] / best:.2f}x** (target >= 3x and >= 3,000 jobs/s).\n")

    # -- precision
    if prec:
        rows = []
        for key, v in prec.items():
            name, kind = key.split("/")
            ran = v.get("ran", [])
            rows.append([LABEL[name], DBL[kind], ms(v["p50"]), ms(v["p95"]), ms(v["p99"]), ms(v["max"]),
                         ms(v["min"]), f"{min(ran) if ran else 0}/{v.get('expected')}", len(v.get("reps", []))])
        parts.append("### Timing precision: lateness = job's own start − execute_at, ms "
                     "(200 jobs spread over 10 s, the first 3 s ahead, worker already running)\n\n" +
                     table(["subject", "database", "p50", "p95", "p99", "max", "min", "ran (worst rep)", "reps"], rows) + "\n")

    # -- pickup
    if pick:
        rows = []
        via_label = {"orm": "`task.enqueue()` from another process", "api": "REST API POST /api/jobs/",
                     "inproc": "`task.enqueue()` inside a running job (same process)", "enqueue": "its enqueue API"}
        for key, v in pick.items():
            name, kind, via = key.split("/")
            missing = sum(x.get("missing", 0) for x in v.get("reps", []))
            rows.append([LABEL[name], DBL[kind], via_label[via], ms(v["p50"]), ms(v["p99"]), ms(v["max"]),
                         ms(v["after_p50"]) if "after_p50" in v else "-",
                         ms(v["after_p99"]) if "after_p99" in v else "-", missing or ""])
        parts.append(f"### Pickup latency: idle worker, one due-now job at a time, ms "
                     f"({cfg.get('pickup_n', 50)} jobs per row)\n\n"
                     "From the moment before the enqueue call to the job's own start (p50, p99, max), and from "
                     "the moment the enqueue call returned, its transaction committed (from return).\n\n" +
                     table(["subject", "database", "enqueued through", "p50", "p99", "max",
                            "p50 from return", "p99 from return", "missing"], rows) + "\n")

    # -- memory
    mem = r.get("memory", {})
    if mem:
        rows = [[DBL[k], fmt(v["idle_mb"], 1), fmt(v["future_mb"], 1), f"+{fmt(v['future_growth_mb'], 1)}",
                 fmt(v["due_mb"], 1), f"+{fmt(v['due_growth_mb'], 1)}", fmt(v.get("due_remaining"))]
                for k, v in mem.items()]
        parts.append("### Memory: dispatcher RSS (psutil), MB, one run each\n\n" + table(
            ["database", "idle", f"{fmt(cfg.get('mem_future'))} future pending", "growth",
             f"{fmt(cfg.get('mem_due'))} due, 4 slots (peak)", "growth", "due jobs left when sampling stopped"], rows) +
            f"\n\nFuture jobs are due from now + 240 s, 5 ms apart (the 300 s window holds more than the heap cap). "
            f"The due run is sampled every 0.5 s for up to {cfg.get('mem_due_seconds')} s.\n")

    # -- scale
    sc = r.get("scale", {})
    if sc:
        names = list(next(iter(sc.values()))["queries"].keys())
        rows = []
        for size, v in sc.items():
            rows.append([fmt(int(size))] + [f"{fmt(v['queries'][q]['ms']['median'], 2)} / {fmt(v['queries'][q]['p99'], 2)}"
                                            for q in names] + [ms(v["throughput"]["jobs_per_s"], 0)])
        parts.append("### Scale: hot queries with finished rows in the table (PostgreSQL), ms median / p99 of 30, "
                     "and throughput (N = " + fmt(cfg.get("scale_n")) + ", 4 slots)\n\n" +
                     table(["finished rows"] + names + ["jobs/s"], rows) +
                     "\n\nThe raw statements run with 1,000 due pending rows present (the claim is rolled back); "
                     "`store.*` are the dispatcher's own calls, ORM included.\n")
        for size, v in sc.items():
            plans = "\n\n".join(f"{q}:\n{v['queries'][q]['plan']}" for q in names if v["queries"][q]["plan"])
            parts.append(f"<details><summary>EXPLAIN (ANALYZE, BUFFERS) with {fmt(int(size))} finished rows</summary>\n\n"
                         f"```\n{plans}\n```\n</details>\n")

    # -- enqueue
    enq = r.get("enqueue", {})
    if enq:
        rows = []
        for key, v in enq.items():
            name, kind = key.split("/")
            rows.append([LABEL[name], DBL[kind], ms(v["enqueue_per_s"], 0), ms(v.get("api_bulk_per_s"), 0),
                         ms(v.get("api_single_p50_ms")), ms(v.get("api_single_p99_ms"))])
        parts.append("### Enqueue: one at a time through the task API, and through the REST API "
                     "(Django's threaded dev server, one client)\n\n" + table(
                         ["subject", "database", "task.enqueue() / defer() / async_task() per s",
                          "bulk API jobs/s (1,000 per request)", "single API create p50 ms", "p99 ms"], rows) + "\n")

    scl = r.get("scaling", {})
    if scl:
        parts.append("### Several dispatchers on one PostgreSQL\n\n" + scaling_table(results) +
                     "\n\nSee docs/SCALING.md.\n")

    obs = r.get("observability", {})
    if obs:
        rows, costs = [], []
        for key, v in obs.items():
            kind, name = key.split("/", 1)
            if name == "costs":
                costs.append(f"- {kind}: tallying one job for the rollups {v['rollups_us_per_job']:.2f} µs (loop thread); "
                             f"one INFO line {v['log_line_off_us']:.2f} µs when nothing keeps it, "
                             f"{v['log_line_captured_us']:.2f} µs captured (worker thread)")
                continue
            paired = v.get("paired_cost")
            cost = "" if name == "neither" or not paired else (
                f"{med(paired) * 100:.1f} % ({paired['min'] * 100:.1f} to {paired['max'] * 100:.1f})")
            cpu_cost = v.get("cpu_cost")
            cpu_text = "" if name == "neither" or not cpu_cost or cpu_cost.get("median") is None else (
                f"{med(cpu_cost) * 100:+.1f} % ({cpu_cost['min'] * 100:+.1f} to {cpu_cost['max'] * 100:+.1f})")
            rows.append([{"pg": "PostgreSQL", "sqlite": "SQLite"}.get(kind, kind), name, ms(v["jobs_per_s"], 0), cost,
                         ms(v.get("cpu_us_per_job"), 0), cpu_text, str(len(v["reps"]))])
        parts.append("### Observability: log capture and rollups on and off (a task that logs one INFO line, 4 slots)\n\n" +
                     table(["database", "on", "jobs/s", "throughput lost against neither, same repetition (median, range)",
                            "CPU µs per job (dispatcher + its PostgreSQL backends)", "CPU per job against neither, same repetition", "reps"], rows) +
                     "\n\nPer-job CPU, measured in-process (best of 5):\n\n" + "\n".join(costs) + "\n")
    return "\n".join(parts)


def scaling_table(results):
    cfg = results.get("config", {})
    scl = results.get("results", {}).get("scaling", {})
    rows = []
    for count, v in scl.items():
        rows.append([count, fmt(int(count) * 4), ms(v["jobs_per_s"], 0), ms(v["jobs_per_s_wall"], 0),
                     ms(v["claims"], 0), ms(v["short"], 0), ms(v["empty"], 0), ms(v["short_pct"], 1),
                     ms(v["rows_per_claim"], 2)])
    return (f"N = {fmt(cfg.get('scaling_n'))} due no-op jobs, each dispatcher 4 slots, {cfg.get('reps')} repetitions.\n\n" +
            table(["dispatchers", "slots", "jobs/s (first start → last finish)", "jobs/s (spawn → last finish)",
                   "claim statements", "short claims (< asked)", "empty claims", "short %", "rows per claim"], rows))


def replace_between(path, start, end, body, header):
    text = open(path).read() if os.path.exists(path) else header + f"\n{start}\n{end}\n"
    if start not in text:
        text += f"\n{start}\n{end}\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)
    with open(path, "w") as f:
        f.write(text)


def write_docs(results, text):
    replace_between(
        os.path.join(ROOT, "docs", "BENCHMARKS.md"), "<!-- bench:start -->", "<!-- bench:end -->", text,
        "# Benchmarks\n\nGenerated by `make bench` (bench/run.py) between the markers below.\n",
    )
    if results.get("results", {}).get("scaling"):
        replace_between(
            os.path.join(ROOT, "docs", "SCALING.md"), "<!-- bench:scaling:start -->", "<!-- bench:scaling:end -->",
            scaling_table(results), "# Scaling past one machine\n",
        )
