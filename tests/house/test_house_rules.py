"""Rules of the house: the layout's (docs/ARCHITECTURE.md, "The packages") kept by a test.

Read from the source only (no Django). "The app's packages" are the
top-level entries of ``scheduler_app/``: a subpackage is one node, a root
module another; inside each of them, the modules of a package import
each other without a cycle either. Every import counts, those inside
functions too (they run later, but a cycle they close is a cycle); only
``if TYPE_CHECKING`` ones do not.
"""

import ast
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "scheduler_app"
MAX_LINES = 450
MAX_ROOT_MODULES = 12
LONG_FUNCTION = 60
MAX_LONG_FUNCTIONS = 3
# Packages that import nothing of the app but what is listed (and the standard library only).
PURE = {"vocabulary": set(), "dispatcher": {"vocabulary"}}
VENDOR_WORDS = ("is_postgres", "is_sqlite", ".vendor", "vendor(")


def modules():
    for path in sorted(APP.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(APP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def node_of(module):
    """Return the top-level entry of ``scheduler_app`` a module belongs to (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path, name, known=None):
    """Return every module ``path`` (module ``name``) imports, with the line; TYPE_CHECKING blocks left out.

    Without ``known``, ``from a import b`` gives ``a`` and ``a.b``; with the
    set of the app's modules, it gives ``a.b`` where that is a module and
    ``a`` where ``b`` is a name ``a`` defines: the module actually run.
    """
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if known is None:
                yield source, node.lineno
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if known is None or submodule in known:
                    yield submodule, node.lineno
                else:
                    yield source, node.lineno


def graph():
    """Return ``{node: {node: [where]}}`` of the app's imports between its top-level entries."""
    edges = {}
    for name, path in modules():
        for target, line in imports(path, name):
            if not target.startswith("scheduler_app."):
                continue
            a, b = node_of(name), node_of(target)
            if a != b and b != "__init__":
                edges.setdefault(a, {}).setdefault(b, []).append(f"{name}:{line}")
    return edges


def module_graph():
    """Return ``{module: {module: [where]}}`` of the imports between modules of one top-level entry."""
    known = dict(modules())
    edges = {}
    for name, path in known.items():
        for target, line in imports(path, name, known):
            if target in known and target != name and node_of(target) == node_of(name) != "__init__":
                edges.setdefault(name, {}).setdefault(target, []).append(f"{name}:{line}")
    return edges


def find_cycle(edges):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_module_is_over_450_lines():
    long = {
        str(path.relative_to(APP.parent)): n
        for _, path in modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_imports_go_down_no_cycle_among_the_apps_packages():
    edges = graph()
    cycle = find_cycle(edges)
    where = [f"{a} -> {b}: {edges[a][b][:3]}" for a, b in zip(cycle, cycle[1:], strict=False)] if cycle else []
    assert cycle is None, " -> ".join(cycle) + "\n" + "\n".join(where)


def test_no_cycle_among_the_modules_of_a_package():
    edges = module_graph()
    cycle = find_cycle(edges)
    where = [f"{a} -> {b}: {edges[a][b][:3]}" for a, b in zip(cycle, cycle[1:], strict=False)] if cycle else []
    assert cycle is None, " -> ".join(cycle) + "\n" + "\n".join(where)


def test_the_root_holds_at_most_twelve_modules():
    root = sorted(p.name for p in APP.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_the_pure_packages_import_only_the_standard_library_and_what_is_below_them():
    allowed_outside = set(sys.stdlib_module_names)
    found = []
    for name, path in modules():
        node = node_of(name)
        if node not in PURE:
            continue
        for target, line in imports(path, name):
            top = target.split(".")[0]
            if top == "scheduler_app":
                if node_of(target) not in {node, *PURE[node]} and target != "scheduler_app":
                    found.append(f"{name}:{line} imports {target}")
            elif top and top not in allowed_outside:
                found.append(f"{name}:{line} imports {target}")
    assert found == []


def test_every_vendor_branch_is_in_the_database_package():
    found = []
    for name, path in modules():
        if node_of(name) == "sql":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(word in line for word in VENDOR_WORDS) and not line.lstrip().startswith("#"):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []


def test_at_most_three_functions_are_over_sixty_lines():
    long = []
    for name, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONG_FUNCTION:
                    long.append((length, f"{name}.{node.name}"))
    assert len(long) <= MAX_LONG_FUNCTIONS, sorted(long, reverse=True)


def test_columns_state_no_bound_of_their_own():
    found = []
    for name, path in modules():
        if node_of(name) != "models":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "max_length" and isinstance(node.value, ast.Constant):
                if node.value.value > 16:  # the short status and policy columns are their choices' length
                    found.append(f"{name}:{node.value.lineno} max_length={node.value.value}")
    assert found == []


def receivers_connected_on_import(tree):
    """Return the lines of ``@receiver`` decorators and of module-level ``.connect(...)`` calls in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if getattr(target, "id", getattr(target, "attr", None)) == "receiver":
                    found.append(decorator.lineno)
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "connect":
            found.append(node.lineno)
    return found


def test_receivers_are_connected_in_ready_not_by_an_import():
    found = [
        f"{name}:{line}"
        for name, path in modules()
        for line in receivers_connected_on_import(ast.parse(path.read_text()))
    ]
    assert found == []


def test_the_checks_find_what_they_look_for():
    assert find_cycle({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {}}) is None
    assert node_of("scheduler_app.sql.dialect") == "sql" and node_of("scheduler_app.conf") == "conf"
    code = "def f():\n    from scheduler_app.admin import jobs\n"
    tmp = APP.parent / "test-artifacts" / "house_probe.py"
    tmp.parent.mkdir(exist_ok=True)
    tmp.write_text(code)
    assert ("scheduler_app.admin", 2) in list(imports(tmp, "scheduler_app.models.probe"))  # inside a function too
    known = {"scheduler_app.admin", "scheduler_app.admin.jobs"}
    assert list(imports(tmp, "scheduler_app.models.probe", known)) == [("scheduler_app.admin.jobs", 2)]
    probe = "@receiver(sig)\ndef f(**kw):\n    pass\n\n\nsetting_changed.connect(f)\n\n\ndef g():\n    sig.connect(f)\n"
    assert receivers_connected_on_import(ast.parse(probe)) == [1, 6]  # not the call inside g
    tmp.write_text("from scheduler_app.admin import site\n")
    assert list(imports(tmp, "scheduler_app.models.probe", known)) == [("scheduler_app.admin", 1)]
