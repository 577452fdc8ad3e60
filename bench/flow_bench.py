"""The ``limits`` measurement: what a queue limit costs the claim path (bench/run.py --only limits).

Two views, on each database of the run:

- the claim statement itself, timed from the dispatcher's store on its own
  connection: 4 due jobs claimed by query from a queue holding ``claim_n``
  due jobs, with no limits (the plain claim) and with limits set high
  enough never to bind (the limited claim: a transaction that locks the
  queue's row, counts its running jobs and recent starts, then claims);
- throughput of one dispatcher with 4 slots on ``curve_n`` no-op jobs in
  the same queue, without and with those limits.
"""

LIMITS = {
    "no limits": {},
    "concurrency_limit 1,000": {"concurrency": 1000},
    "rate_limit 10,000 / s": {"rate": 10000, "period": 1.0},
    "both": {"concurrency": 1000, "rate": 10000, "period": 1.0},
}
# The driver's names for the same settings (claim_cost).
CLAIM_NAMES = {
    "no limits": "plain (no limits)",
    "concurrency_limit 1,000": "concurrency_limit",
    "rate_limit 10,000 / s": "rate_limit",
    "both": "both limits",
}


def set_limits(subj, limits):
    args = ["set_limits"]
    for key, value in limits.items():
        args += [f"--{key}", str(value)]
    subj.driver(*args)


def measure(ctx, *, throughput_once, pack, summary, pct, fmt_s, log):
    out = {}
    for kind in ctx.dbs:
        subj = ctx.subject("ours", kind)
        subj.reset()
        costs = subj.driver("claim_cost", "--n", str(ctx.claim_n), "--repeat", str(ctx.claim_repeat))
        subj.reset()
        for name, times in costs.items():
            out[f"{kind}/claim/{name}"] = {"ms": summary(times), "p99": pct(times, 99)}
            log(f"  {kind} claim of 4, {name}: {out[f'{kind}/claim/{name}']['ms']['median']:.3f} ms")
        for name, limits in LIMITS.items():
            set_limits(subj, limits)
            try:
                index = list(LIMITS).index(name)
                reps = [
                    throughput_once(subj, ctx.curve_n, "default", f"limits-{kind}-{index}-{r}", slots=4)
                    for r in range(ctx.reps)
                ]
            finally:
                set_limits(subj, {})
            out[f"{kind}/throughput/{name}"] = pack(reps)
            log(f"  {kind} 4 slots, {name}: {fmt_s(out[f'{kind}/throughput/{name}']['jobs_per_s'])} jobs/s")
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
            claim = r.get(f"{kind}/claim/{CLAIM_NAMES[name]}") or {}
            tp = r.get(f"{kind}/throughput/{name}") or {}
            tp_med = (tp.get("jobs_per_s") or {}).get("median")
            change = "" if name == "no limits" or not base_tp or not tp_med else f"{100 * (tp_med / base_tp - 1):+.1f} %"
            rows.append([label, name, ms(claim.get("ms"), 2), fmt(claim.get("p99"), 2), ms(tp.get("jobs_per_s"), 0), change])
    return (
        "### Limited queues: the claim's cost and throughput at 4 slots\n\n"
        f"Claim of 4 due jobs by query from a queue holding {fmt(cfg.get('claim_n'))} due jobs, "
        f"{fmt(cfg.get('claim_repeat'))} claims per row, on the dispatcher's own connection (ms); throughput of "
        f"one dispatcher, 4 slots, {fmt(cfg.get('curve_n'))} no-op jobs in that queue. The limits are set high "
        "enough never to bind: the rows measure what counting them costs.\n\n"
        + table(["database", "queue limits", "claim of 4 ms (median)", "p99", "jobs/s, 4 slots", "vs no limits"], rows)
        + "\n"
    )
