"""Rules of the house (issue #10): no module of the app over 450 lines, no import cycle.

Both read the source only (no Django): module-level imports, including
those under a top-level ``if``/``try``, count; imports inside functions and
under ``if TYPE_CHECKING`` do not (they run later, or never).
"""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "scheduler_app"
MAX_LINES = 450


def modules():
    for path in sorted(APP.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(APP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def top_level_imports(tree):
    def walk(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            elif isinstance(node, ast.If):
                test = node.test
                if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                    yield from walk(node.orelse)
                    continue
                yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    yield from walk(block)

    yield from walk(tree.body)


def edges(known):
    graph = {}
    for name, path in modules():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import sub` imports the submodule sub.
                targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_module_is_over_450_lines():
    long = {str(path.relative_to(APP.parent)): n for _, path in modules() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_import_cycle():
    known = {name for name, _ in modules()}
    cycle = find_cycle(edges(known))
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
