"""The ``limits`` measurement: what queue limits and concurrency keys cost (bench/run.py --only limits).

Two views, on each database of the run:

- the claim statement itself, timed from the dispatcher's store on its own
  connection: 4 due jobs claimed by query from a queue holding ``claim_n``
  due jobs, with no limits (the plain claim) and with limits set high
  enough never to bind (the limited claim);
- issue #28's target: throughput of one dispatcher (``rundispatcher``) with
  4 slots on ``curve_n`` (5,000) no-op jobs in the same queue, with no
  limits, with limits that never bind (``concurrency_limit`` 1,000,
  ``rate_limit`` 10,000 per second, both), and with jobs that carry a
  concurrency key whose limit never binds (every job its own key; 4 keys
  of limit 1,000): medians of ``reps`` (3) runs, the variants interleaved
  (each repetition in a rotated order, so that all see the same machine),
  and the loss of each against no limits in %.
"""

LIMITS = {
    "no limits": {},
    "concurrency_limit 1,000": {"concurrency": 1000},
    "rate_limit 10,000 / s": {"rate": 10000, "period": 1.0},
    "both": {"concurrency": 1000, "rate": 10000, "period": 1.0},
    "keyed: own key per job, limit 1": {},
    "keyed: 4 keys, limit 1,000": {},
}
# The keyed rows' jobs (the driver's enqueue_noop arguments).
ENQUEUE = {
    "keyed: own key per job, limit 1": ["--keys", "0", "--key-limit", "1"],
    "keyed: 4 keys, limit 1,000": ["--keys", "4", "--key-limit", "1000"],
}
# The driver's names for the same settings (claim_cost).
CLAIM_NAMES = {
    "no limits": "plain (no limits)",
    "concurrency_limit 1,000": "concurrency_limit",
    "rate_limit 10,000 / s": "rate_limit",
    "both": "both limits",
}


def loss(base, value):
    """Return the loss of ``value`` against ``base`` in % (negative: a gain), or None."""
    if not base or not value:
        return None
    return 100 * (1 - value / base)


def set_limits(subj, limits):
    args = ["set_limits"]
    for key, value in limits.items():
        args += [f"--{key}", str(value)]
    subj.driver(*args)


def measure(ctx, *, throughput_once, pack, summary, pct, fmt_s, log):
    out = {}
    names = list(LIMITS)
    for kind in ctx.dbs:
        subj = ctx.subject("ours", kind)
        subj.reset()
        costs = subj.driver("claim_cost", "--n", str(ctx.claim_n), "--repeat", str(ctx.claim_repeat))
        subj.reset()
        for name, times in costs.items():
            out[f"{kind}/claim/{name}"] = {"ms": summary(times), "p99": pct(times, 99)}
            log(f"  {kind} claim of 4, {name}: {out[f'{kind}/claim/{name}']['ms']['median']:.3f} ms")
        reps = {name: [] for name in names}
        for r in range(ctx.reps):
            k = r % len(names)
            for name in names[k:] + names[:k]:  # interleaved: every variant sees the same machine
                set_limits(subj, LIMITS[name])
                try:
                    index = names.index(name)
                    reps[name].append(
                        throughput_once(
                            subj,
                            ctx.curve_n,
                            "default",
                            f"limits-{kind}-{index}-{r}",
                            slots=4,
                            enqueue_args=ENQUEUE.get(name, ()),
                        )
                    )
                finally:
                    set_limits(subj, {})
        base = None
        for name in names:
            o = out[f"{kind}/throughput/{name}"] = pack(reps[name])
            median = (o.get("jobs_per_s") or {}).get("median")
            base = median if name == "no limits" else base
            lost = loss(base, median)
            o["loss_pct"] = lost
            log(
                f"  {kind} 4 slots, {name}: {fmt_s(o['jobs_per_s'])} jobs/s"
                + ("" if lost is None or name == "no limits" else f", {lost:.1f} % lost")
            )
    return out


def render(results, *, table, ms, fmt):
    r = results.get("results", {}).get("limits", {})
    if not r:
        return ""
    cfg = results.get("config", {})
    dbs = sorted({key.split("/")[0] for key in r})
    rows = []
    for kind in dbs:
        label = {"pg": "PostgreSQL", "sqlite": "SQLite"}[kind]
        base_tp = (r.get(f"{kind}/throughput/no limits") or {}).get("jobs_per_s", {}).get("median")
        for name in LIMITS:
            claim = r.get(f"{kind}/claim/{CLAIM_NAMES.get(name, '')}") or {}
            tp = r.get(f"{kind}/throughput/{name}") or {}
            if not tp and not claim:
                continue
            tp_med = (tp.get("jobs_per_s") or {}).get("median")
            lost = None if name == "no limits" else loss(base_tp, tp_med)
            rows.append(
                [
                    label,
                    name,
                    ms(claim.get("ms"), 2) if claim else "–",
                    fmt(claim.get("p99"), 2) if claim else "–",
                    ms(tp.get("jobs_per_s"), 0),
                    "" if lost is None else f"{lost:.1f} %",
                ]
            )
    return (
        "### Limited queues and concurrency keys: the claim's cost and throughput at 4 slots\n\n"
        f"Claim of 4 due jobs by query from a queue holding {fmt(cfg.get('claim_n'))} due jobs, "
        f"{fmt(cfg.get('claim_repeat'))} claims per row, on the dispatcher's own connection (ms); throughput of "
        f"one dispatcher, 4 slots, {fmt(cfg.get('curve_n'))} no-op jobs in that queue, medians of "
        f"{fmt(cfg.get('reps'))} interleaved runs. The limits (and the keys' limits) are set high enough never "
        "to bind: the rows measure what counting them costs; issue #28's target is a loss of at most 15 % "
        "against no limits.\n\n"
        + table(
            ["database", "queue limits", "claim of 4 ms (median)", "p99", "jobs/s, 4 slots", "loss vs no limits"], rows
        )
        + "\n"
    )
