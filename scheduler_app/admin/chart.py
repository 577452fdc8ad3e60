"""The geometry of the dashboard's throughput chart (an SVG drawn by a template)."""

from django.utils import timezone
from django.utils.dateparse import parse_datetime


def throughput_chart(series, *, width=720, height=160):
    """Return the geometry of a stacked bar chart (succeeded under failed) per minute."""
    top = 14
    bottom = 20
    left = 34
    plot_h = height - top - bottom
    n = max(len(series), 1)
    step = (width - left - 4) / n
    peak = max([s["succeeded"] + s["failed"] for s in series] + [1])
    # A round axis maximum: 1, 2, 5, 10, 20, 50 ...
    scale = next(v for v in _nice_steps() if v >= peak)
    bars = []
    for i, s in enumerate(series):
        x = left + i * step + 1
        ok_h = plot_h * s["succeeded"] / scale
        fail_h = plot_h * s["failed"] / scale
        minute = timezone.localtime(parse_datetime(s["minute"])).strftime("%H:%M")
        bars.append(
            {
                "x": round(x, 2),
                "w": round(max(step - 2, 1), 2),
                "ok_y": round(top + plot_h - ok_h, 2),
                "ok_h": round(ok_h, 2),
                "fail_y": round(top + plot_h - ok_h - fail_h, 2),
                "fail_h": round(fail_h, 2),
                "succeeded": s["succeeded"],
                "failed": s["failed"],
                "minute": minute,
            }
        )
    ticks = [
        {"x": b["x"], "label": b["minute"]} for i, b in enumerate(bars) if i % 10 == 0 or i == len(bars) - 1
    ]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "base_y": top + plot_h,
        "plot_h": plot_h,
        "mid_y": top + plot_h / 2,
        "max": scale,
        "half": scale / 2 if scale % 2 else scale // 2,
        "bars": bars,
        "ticks": ticks,
        "label_y": height - 5,
        "total_succeeded": sum(s["succeeded"] for s in series),
        "total_failed": sum(s["failed"] for s in series),
    }


def _nice_steps():
    v = 1
    while True:
        for m in (1, 2, 5):
            yield v * m
        v *= 10
