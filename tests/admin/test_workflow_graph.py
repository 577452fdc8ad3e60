"""The workflow graph's layout (admin/graph.py): longest-path rows, no recursion, grouping past 200 jobs, one <svg>."""

import re

from scheduler_app.admin import graph

A, B = "app.tasks.fetch", "app.tasks.resize"


def url(pk):
    return f"/job/{pk}/"


def group_url(task):
    return f"/jobs/?task={task}"


def test_a_job_is_one_row_below_its_deepest_dependency():
    # 1 -> 2 -> 3, and 1 -> 3 directly: 3 is on row 2, not row 1.
    assert graph.layers([1, 2, 3, 4], [(1, 2), (2, 3), (1, 3)]) == {1: 0, 2: 1, 3: 2, 4: 0}


def test_a_chain_of_10000_needs_no_recursion():
    ids = list(range(10_000))
    layer = graph.layers(ids, [(i, i + 1) for i in ids[:-1]])
    assert layer[9_999] == 9_999


def test_nodes_do_not_overlap_and_fit_the_drawing():
    jobs = [(i, A, "pending") for i in range(1, 21)] + [(21, B, "waiting")]
    edges = [(i, 21) for i in range(1, 21)]
    nodes, node_edges, grouped = graph.build_nodes(jobs, edges, url, group_url)
    width, height, frames = graph.place(nodes, node_edges)
    assert not grouped and len(nodes) == 21 and list(frames) == [0]  # 20 side by side: four lines
    boxes = {(n.x, n.y) for n in nodes}
    assert len(boxes) == 21  # every job has its own place
    assert all(n.x >= 0 and n.x + graph.NODE_W <= width and n.y + graph.NODE_H <= height for n in nodes)
    last = next(n for n in nodes if n.key == 21)
    assert last.y > max(n.y for n in nodes if n.key != 21)


def test_past_200_jobs_a_long_chain_is_grouped_into_bands():
    jobs = [(i, A if i % 2 else B, "succeeded") for i in range(1, 1001)]
    svg, grouped = graph.render(jobs, [(i, i + 1) for i in range(1, 1000)], url, group_url)
    assert grouped
    nodes = svg.count('class="sched-node ')
    assert nodes <= 2 * graph.ROWS_MAX
    counts = [int(n) for n in re.findall(r">(\d+) jobs<", svg)]
    assert sum(counts) == 1000
    assert svg.count("<svg") == 1


def test_labels_and_links_are_escaped():
    svg, _ = graph.render([(1, "app.tasks.<b>", "failed")], [], lambda pk: '/x/?a=1&b="2"', group_url)
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "&amp;b=&quot;2&quot;" in svg


def test_a_fan_out_into_a_wrapped_row_is_one_arrow_to_its_frame_and_a_few_arrows_stay_arrows():
    # 1 -> 2..15 (14 jobs: three lines) -> 16; and 2 -> 17 alone.
    jobs = [(i, A, "pending") for i in range(1, 18)]
    edges = [(1, i) for i in range(2, 16)] + [(i, 16) for i in range(2, 16)] + [(2, 17)]
    svg, grouped = graph.render(jobs, edges, url, group_url)
    assert not grouped
    assert svg.count('class="sched-frame"') == 1
    assert svg.count('class="sched-edge"') == 3  # into the frame, out of the frame, 2 -> 17


def test_a_binary_tree_keeps_every_arrow():
    jobs = [(i, A, "pending") for i in range(1, 32)]
    edges = [(i // 2, i) for i in range(2, 32)]
    svg, _ = graph.render(jobs, edges, url, group_url)
    assert svg.count('class="sched-edge"') == 30
    assert svg.count('class="sched-frame"') == 2  # the rows of 8 and 16 wrap
