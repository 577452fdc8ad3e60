"""A workflow's graph as one inline <svg>: a node per job (its status colour, a link), an arrow per dependency.

Layered top to bottom: a job's row is the longest path to it from a job
with no dependency in the workflow (computed in Kahn's order, no recursion,
so a chain of 10,000 jobs is fine). A row wider than ``PER_ROW`` nodes wraps.
Past ``NODES_MAX`` jobs the graph is grouped: the jobs of one row with the
same task become one node with their count and a bar of their statuses, and
past ``ROWS_MAX`` rows consecutive rows merge into bands (the arrows inside a
band are left out). Colours come from classes (``workflows.css``), so the
page's CSS (dark mode too) styles it and no inline style is needed.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from .formatting import status_label

NODES_MAX = 200
ROWS_MAX = 30
PER_ROW = 6
NODE_W, NODE_H = 150, 44
GAP_X, GAP_Y, WRAP_Y = 14, 40, 12
MARGIN = 8
BLOCK_PAD = 6  # the frame around a wrapped row
LABEL_MAX = 17


@dataclass
class Node:
    key: object
    row: int
    task: str
    url: str
    job_id: int | None = None  # None: a group of jobs
    statuses: dict = field(default_factory=dict)  # status -> count
    callback: str = ""  # a workflow's callback: its name (on_success, on_failure, on_finish)
    x: float = 0
    y: float = 0

    @property
    def count(self):
        return sum(self.statuses.values())

    @property
    def status(self):
        return next(iter(self.statuses)) if self.job_id is not None else "group"


def layers(ids, edges):
    """Return ``{id: layer}``: 0 without dependencies, else one more than the deepest dependency."""
    waits = dict.fromkeys(ids, 0)
    dependents = defaultdict(list)
    for dep, job in edges:
        waits[job] += 1
        dependents[dep].append(job)
    layer = dict.fromkeys(ids, 0)
    ready = [pk for pk in ids if not waits[pk]]
    while ready:
        pk = ready.pop()
        for other in dependents[pk]:
            layer[other] = max(layer[other], layer[pk] + 1)
            waits[other] -= 1
            if not waits[other]:
                ready.append(other)
    deepest = max(layer.values(), default=0)
    for pk, left in waits.items():  # a cycle cannot arise; draw any leftover below the rest
        if left:
            layer[pk] = deepest + 1
    return layer


def build_nodes(jobs, edges, job_url, group_url, last=()):
    """Return ``(nodes, node_edges, grouped)`` for ``jobs`` (``(id, task, status)``) and ``edges`` (dependency, dependent).

    The jobs in ``last`` (a workflow's callbacks; a dict names each) get a row of their own, below
    the rest, and an arrow from each job nothing else waits for (the workflow's end leads to them).
    """
    if last:
        waited_on = {dep for dep, _ in edges}
        ends = [pk for pk, _, _ in jobs if pk not in last and pk not in waited_on]
        edges = [*edges, *((end, pk) for pk in last for end in ends)]
    layer = layers([pk for pk, _, _ in jobs], edges)
    if last:
        below = max((n for pk, n in layer.items() if pk not in last), default=-1) + 1
        layer.update({pk: max(layer[pk], below) for pk in last if pk in layer})
    names = last if isinstance(last, dict) else {}
    if len(jobs) <= NODES_MAX:
        nodes = {
            pk: Node(pk, layer[pk], task, job_url(pk), pk, {status: 1}, callback=names.get(pk, ""))
            for pk, task, status in jobs
        }
        return list(nodes.values()), list(edges), False
    rows = max(layer.values(), default=0) + 1
    band = (lambda n: n) if rows <= ROWS_MAX else (lambda n: n * ROWS_MAX // rows)
    groups, key_of, first = {}, {}, {}
    for pk, task, status in jobs:
        key = (band(layer[pk]), task)
        key_of[pk] = key
        node = groups.get(key)
        if node is None:
            node = groups[key] = Node(key, key[0], task, group_url(task))
        node.statuses[status] = node.statuses.get(status, 0) + 1
        first.setdefault(key, pk)
    for key, node in groups.items():  # a group of one job is that job's node
        if node.count == 1:
            node.job_id, node.url = first[key], job_url(first[key])
    node_edges = {(key_of[d], key_of[j]) for d, j in edges if groups[key_of[d]].row < groups[key_of[j]].row}
    return list(groups.values()), sorted(node_edges, key=repr), True


def place(nodes, node_edges):
    """Set each node's x and y; return the drawing's ``(width, height, frames)``.

    Within a row, nodes go in the order of the mean position of what they
    depend on (fewer crossings), then by key. ``frames``: ``{row: (x0, y0,
    x1, y1)}`` around each row that wraps onto several lines.
    """
    by_row = defaultdict(list)
    for node in nodes:
        by_row[node.row].append(node)
    sources = defaultdict(list)
    for dep, job in node_edges:
        sources[job].append(dep)
    order, frames = {}, {}
    cols = min(PER_ROW, max((len(r) for r in by_row.values()), default=1))
    width = 2 * MARGIN + cols * NODE_W + (cols - 1) * GAP_X
    y = MARGIN
    for row in sorted(by_row):

        def weight(node):
            seen = [order[k] for k in sources[node.key] if k in order]
            return (sum(seen) / len(seen) if seen else -1, node.key)

        members = sorted(by_row[row], key=weight)
        for i, node in enumerate(members):
            order[node.key] = i  # its place in the row, wrapped lines one after another
            in_line = min(PER_ROW, len(members) - i // PER_ROW * PER_ROW)
            left = (width - in_line * NODE_W - (in_line - 1) * GAP_X) / 2
            node.x = left + (i % PER_ROW) * (NODE_W + GAP_X)
            node.y = y + (i // PER_ROW) * (NODE_H + WRAP_Y)
        lines = -(-len(members) // PER_ROW)
        tall = lines * NODE_H + (lines - 1) * WRAP_Y
        if lines > 1:
            frames[row] = (MARGIN - BLOCK_PAD, y - BLOCK_PAD, width - MARGIN + BLOCK_PAD, y + tall + BLOCK_PAD)
        y += tall + GAP_Y
    return width, max(y - GAP_Y + MARGIN, 2 * MARGIN), frames


def bundle(by_key, node_edges, frames):
    """Return ``(edges, ends)``: the arrows to draw, and the frames' ends they may point at.

    A node with more than a line's worth of arrows into one wrapped row gets
    one arrow to the row's frame instead (a fan-out); so do the arrows out of
    a wrapped row into one node (a fan-in, a chord's step).
    """
    into, out_of = defaultdict(list), defaultdict(list)
    for a, b in node_edges:
        if by_key[b].row in frames:
            into[(a, ("in", by_key[b].row))].append((a, b))
        if by_key[a].row in frames:
            out_of[(("out", by_key[a].row), b)].append((a, b))
    covered, edges = set(), []
    for groups in (into, out_of):
        for pair, members in groups.items():
            if len(members) > PER_ROW:
                covered.update(members)
                edges.append(pair)
    ends = {}
    for row, (x0, y0, x1, y1) in frames.items():
        left = (x0 + x1 - NODE_W) / 2
        ends[("in", row)] = Node(("in", row), row, "", "", x=left, y=y0)
        ends[("out", row)] = Node(("out", row), row, "", "", x=left, y=y1 - NODE_H)
    return [e for e in node_edges if e not in covered] + edges, ends


def short(text):
    name = text.rpartition(".")[2]
    return name if len(name) <= LABEL_MAX else name[: LABEL_MAX - 1] + "…"


def _ports(nodes_by_key, node_edges):
    """Return ``{edge: (x out, x in)}``: a node's arrows leave and arrive spread along its edge, in the order of the other ends."""
    outs, ins = defaultdict(list), defaultdict(list)
    for edge in node_edges:
        outs[edge[0]].append(edge)
        ins[edge[1]].append(edge)
    ports = {edge: [0, 0] for edge in node_edges}
    for side, groups, other in ((0, outs, 1), (1, ins, 0)):
        for key, edges in groups.items():
            edges.sort(key=lambda e: nodes_by_key[e[other]].x)
            step = min(NODE_W * 0.6 / max(len(edges) - 1, 1), 12)
            start = nodes_by_key[key].x + NODE_W / 2 - step * (len(edges) - 1) / 2
            for i, edge in enumerate(edges):
                ports[edge][side] = start + i * step
    return ports


def _arrow(a, b, sx, tx):
    sy, ty = a.y + NODE_H, b.y
    bend = max((ty - sy) / 2, GAP_Y / 2)
    return f"M{sx:g},{sy:g} C{sx:g},{sy + bend:g} {tx:g},{ty - bend:g} {tx:g},{ty - 2:g}"


def _status_bar(node):
    x, width, total, parts = node.x + 8, NODE_W - 16, node.count, []
    for status, n in sorted(node.statuses.items()):
        w = width * n / total
        parts.append((f"sched-seg sched-seg-{status}", f"{x:g}", f"{node.y + NODE_H - 10:g}", f"{w:g}"))
        x += w
    return format_html_join("", '<rect class="{}" x="{}" y="{}" width="{}" height="5"/>', parts)


def _node(node):
    x, y = f"{node.x:g}", f"{node.y:g}"
    if node.job_id is not None:
        said = f"{node.callback} callback: " if node.callback else ""
        title = f"{said}#{node.job_id} {node.task} · {status_label(node.status)}"
        sub, bar = f"{node.callback + ' · ' if node.callback else ''}#{node.job_id} · {status_label(node.status)}", ""
        css = f"sched-node sched-node-{node.status}" + (" sched-node-callback" if node.callback else "")
    else:
        counts = ", ".join(f"{n} {status_label(s).lower()}" for s, n in sorted(node.statuses.items()))
        title, sub, bar = f"{node.count} jobs of {node.task}: {counts}", f"{node.count} jobs", _status_bar(node)
        css = "sched-node sched-node-group"
    # No url (the user may not see jobs): a group, not a link to a 403.
    opening = format_html('<a href="{}" ', node.url) if node.url else mark_safe("<g ")
    return format_html(
        '{}class="{}" data-job="{}"><title>{}</title>'
        '<rect class="sched-box" x="{}" y="{}" width="{}" height="{}" rx="6"/>'
        '<text x="{}" y="{}" class="sched-node-task">{}</text><text x="{}" y="{}" class="sched-node-sub">{}</text>{}{}',
        opening,
        css,
        node.job_id or "",
        title,
        x,
        y,
        NODE_W,
        NODE_H,
        f"{node.x + 8:g}",
        f"{node.y + 17:g}",
        short(node.task),
        f"{node.x + 8:g}",
        f"{node.y + 33 - (6 if bar else 0):g}",
        sub,
        bar,
        mark_safe("</a>" if node.url else "</g>"),
    )


def render(jobs, edges, job_url, group_url, label="Workflow graph", last=()):
    """Return ``(svg html, grouped)``: the graph of ``jobs`` and ``edges`` as one <svg> element (``last``: see build_nodes)."""
    nodes, node_edges, grouped = build_nodes(jobs, edges, job_url, group_url, last)
    width, height, frames = place(nodes, node_edges)
    by_key = {node.key: node for node in nodes}
    arrows, ends = bundle(by_key, node_edges, frames)
    by_key.update(ends)
    ports = _ports(by_key, arrows)
    paths = format_html_join(
        "",
        '<path class="sched-edge" d="{}" marker-end="url(#sched-arrow)"/>',
        ((_arrow(by_key[a], by_key[b], *ports[(a, b)]),) for a, b in arrows),
    )
    boxes = format_html_join(
        "",
        '<rect class="sched-frame" x="{}" y="{}" width="{}" height="{}" rx="10"/>',
        ((f"{x0:g}", f"{y0:g}", f"{x1 - x0:g}", f"{y1 - y0:g}") for x0, y0, x1, y1 in frames.values()),
    )
    svg = format_html(
        '<svg class="sched-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'role="img" aria-label="{}"><defs><marker id="sched-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto"><path class="sched-arrowhead" d="M0,0 L10,5 L0,10 z"/></marker></defs>'
        '<g class="sched-frames">{}</g><g class="sched-edges">{}</g><g class="sched-nodes">{}</g></svg>',
        label,
        boxes,
        paths,
        format_html_join("", "{}", ((_node(n),) for n in nodes)),
        w=f"{width:g}",
        h=f"{height:g}",
    )
    return svg, grouped
