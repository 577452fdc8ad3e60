"""Words that name code name code that exists: docstrings, comments and docs/*.md.

What is checked:

* a dotted name of the app (``scheduler_app.x.y``, or ``x.y`` in double
  backticks in a docstring or a comment, in single ones in docs/*.md, or
  bare in a comment) whose first word is a package or module of the app, a
  module beside the file, or a module of the standard library: the module
  must exist and what follows must be an attribute of it;
* a path (``scheduler_app/x/y.py``, ``tests/...``, ``x/y.py`` inside the
  app, a template's path) and a file name (``y.py``): the file must exist;
* the target of a ``:func:`name``` role: a name its module (or a class of
  it) defines;
* a relative link of docs/*.md: its target exists inside the repository.

Names in prose the checker cannot tell from variables (``job.status``) pass
when their first word is no module at all, unless it is the name of a
module that no longer exists (``RETIRED``).
"""

import ast
import functools
import importlib
import inspect
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "scheduler_app"
DOCS = ROOT / "docs"
# Names modules of the app once had; a dotted name starting with one is stale.
RETIRED = {"limits", "rules", "runner", "pg", "stored_json"}
FILE_ENDINGS = ("py", "md", "html", "js", "css", "sh", "toml", "txt", "json", "ini", "cfg", "png", "svg")
# Pictures a run makes (screenshots): a bare name of one is not looked for.
MADE = ("png", "svg")
# The first words of a path that is the repository's (``mysite/settings.py`` is an example's).
ROOTS = {"scheduler_app", "tests", "docs", "scripts", "bench", "project", "templates"}
# Words that may name an object in prose: settings (Django's; what follows is a setting), Django's admin.
OBJECTS = {"settings": None, "admin": "django.contrib.admin"}
# Values quoted as they are typed, not names of the app's code.
EXAMPLES = {"tasks.send_report"}
# ``scheduler_app.<permission>`` and ``scheduler_app.E001`` (a system check's id).
NOT_CODE = re.compile(r"scheduler_app\.(?:(?:view|add|change|delete)_\w+|[EW]\d{3})")
DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
PATH = r"(?:[\w.-]+/)+[\w.-]*"
# Findings in the modules another change rewrites at the same time (the engine's: sql/,
# dispatcher/, lifecycle/transitions.py), as ``file: name``: listed so that they
# shrink; one fixed there must leave this list too.
PENDING = set()


def app_modules():
    """Return ``{dotted name: path}`` of every module and package of the app (migrations left out)."""
    found = {}
    for path in sorted(APP.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = app_modules()


@functools.cache
def stored_names():
    """Return the ``scheduler_app.…`` strings of the app's code: logger names, stored exception paths."""
    found = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"scheduler_app(?:\.\w+)+", node.value):
                    found.add(node.value)
    return found


TOP = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
BY_LAST = {}
for _name in MODULES:
    BY_LAST.setdefault(_name.rsplit(".", 1)[-1], []).append(_name)


@functools.cache
def file_names():
    """Return the names of the repository's files (read when a test first asks: not at collection)."""
    skipped = {".git", ".venv", "test-artifacts"}
    return {p.name for p in ROOT.rglob("*") if p.is_file() and not skipped & set(p.parts)}


def has(target, attribute):
    """Return whether ``target`` has ``attribute``: a class's instances too (annotated, or set in its code)."""
    if hasattr(target, attribute):
        return True
    if inspect.isclass(target):
        try:
            source = inspect.getsource(target)
        except (OSError, TypeError):
            source = ""
        return attribute in getattr(target, "__annotations__", {}) or f"self.{attribute} =" in source
    return False


def resolves(dotted):
    """Return whether ``dotted`` is a module, or a module and a chain of attributes.

    The first attribute may be one of a class of the module (``timeline.drop_due``:
    the timeline, an object of ``Timeline``).
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if module_name.startswith("scheduler_app") and module_name not in MODULES:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        starts = [module] + [c for c in vars(module).values() if inspect.isclass(c)]
        for target in starts:
            for attribute in rest:
                if not has(target, attribute):
                    break
                target = getattr(target, attribute, None)
            else:
                return True
        return False
    return False


def candidates(dotted, package=None):
    """Return the full names ``dotted`` may stand for, or None when it is no module's name (a variable's)."""
    first = dotted.split(".")[0]
    if dotted.rsplit(".", 1)[-1] in FILE_ENDINGS or dotted in EXAMPLES:
        return None  # a file name: file_problems
    if first == "scheduler_app":
        return None if dotted in stored_names() or NOT_CODE.fullmatch(dotted) else [dotted]
    if first in RETIRED:
        return []
    if first in OBJECTS and OBJECTS[first] is None:
        return None
    options = [OBJECTS[first] + dotted[len(first) :]] if first in OBJECTS else []
    if package and f"{package}.{first}" in MODULES:
        options.append(f"{package}.{dotted}")
    if first in TOP:
        options.append(f"scheduler_app.{dotted}")
    options += [f"{name.rsplit('.', 1)[0]}.{dotted}" for name in BY_LAST.get(first, [])]
    if not options and first in sys.stdlib_module_names:
        module = importlib.import_module(first)
        rest = dotted.split(".")[1:]
        # ``datetime.max``: the class the module is named after
        options = [dotted] + ([f"{first}.{first}.{'.'.join(rest)}"] if hasattr(module, first) else [])
    return options or None


def name_problems(text, package=None):
    """Return the dotted names in ``text`` that name nothing."""
    found = []
    for dotted in dict.fromkeys(text):
        options = candidates(dotted, package)
        if options is not None and not any(resolves(o) for o in options):
            found.append(dotted)
    return found


def file_problems(names, here):
    """Return the paths and file names of ``names`` that are no file of the repository."""
    found = []
    for name in dict.fromkeys(names):
        name = name.rstrip(".,:;")
        if "/" not in name:
            ending = name.rsplit(".", 1)[-1]
            if ending in FILE_ENDINGS and ending not in MADE and name not in file_names():
                found.append(name)
            continue
        if name.startswith("../"):
            target = (here / name).resolve()
            if not target.is_relative_to(ROOT) or not target.exists():
                found.append(name)  # outside the repository
            continue
        first, last = name.partition("/")[0], name.rsplit("/", 1)[-1]
        is_file = "." in last and last.rsplit(".", 1)[-1] in FILE_ENDINGS
        if "/." in name or not (first in ROOTS or (first in TOP and (is_file or "." in last))):
            continue  # a URL, a value, an example's path, a folder made when something runs
        if "." in last and not is_file:  # ``sql/base.ending``: a module's attribute
            if not resolves("scheduler_app." + name.replace("/", ".").removeprefix("scheduler_app.")):
                found.append(name)
            continue
        bases = [ROOT, APP, here, APP / "templates", APP / "static", DOCS]
        if not any((base / name).exists() for base in bases):
            found.append(name)
    return found


def code_texts(path):
    """Yield ``(line, text, is_comment)`` of the docstrings and comments of ``path``."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield (node.body[0].lineno, doc, False)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield (token.start[0], token.string, True)


def role_problems(text, module):
    """Return the targets of ``:func:`name``` roles in ``text`` that ``module`` (or a class of it) does not define."""
    found = []
    for target in re.findall(r":(?:func|class|meth|attr|data):`~?\.?([\w.]+)`", text):
        if "." in target:
            if name_problems([target], module.rpartition(".")[0]):
                found.append(target)
        elif not resolves(f"{module}.{target}"):
            found.append(target)
    return found


def code_findings(path, module):
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    findings = []
    for line, text, is_comment in code_texts(path):
        names = re.findall(rf"``({DOTTED})", text)
        names += re.findall(r"\b(scheduler_app(?:\.\w+)+)", text)
        if is_comment:
            names += [n for n in re.findall(rf"(?<![\w./`-])({DOTTED})(?![\w/(])", text) if n.split(".")[0] in TOP]
        paths = re.findall(rf"``({PATH}|[\w-]+\.\w+)``", text) + re.findall(
            rf"(?<![\w/])((?:scheduler_app|tests|docs)/{PATH})", text
        )
        problems = name_problems(names, package) + file_problems(paths, path.parent) + role_problems(text, module)
        for problem in problems:
            findings.append(f"{path.relative_to(ROOT)}:{line}: {problem}")
    return findings


def shown(path):
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def doc_findings(path):
    text = path.read_text()
    findings = []
    for number, line in enumerate(text.splitlines(), 1):
        quoted = re.findall(r"`([^`\n]+)`", line)
        names = [q for q in quoted if re.fullmatch(DOTTED, q)]
        names += re.findall(r"\b(scheduler_app(?:\.\w+)+)", line)
        paths = [q for q in quoted if re.fullmatch(rf"{PATH}|[\w-]+\.(?:{'|'.join(FILE_ENDINGS)})", q)]
        paths += re.findall(rf"(?<![\w/`])((?:scheduler_app|tests|docs)/{PATH})", line)
        for problem in name_problems(names) + file_problems(paths, DOCS):
            findings.append(f"{shown(path)}:{number}: {problem}")
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", line):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            resolved = (path.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                findings.append(f"{shown(path)}:{number}: link {target}")
    return findings


def all_findings():
    found = []
    for module, path in MODULES.items():
        found += code_findings(path, module)
    for path in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]:
        found += doc_findings(path)
    return found


def test_docstrings_comments_and_docs_name_what_exists():
    found = all_findings()
    assert [f for f in found if re.sub(r":\d+:", ":", f) not in PENDING] == []
    assert sorted(PENDING - {re.sub(r":\d+:", ":", f) for f in found}) == []  # fixed: take it off the list


@pytest.mark.parametrize("doc, package", [("ADMIN.md", "admin"), ("API.md", "api"), ("SCHEDULES.md", "schedules")])
def test_the_docs_of_a_package_name_each_of_its_modules(doc, package):
    text = (DOCS / doc).read_text()
    modules = sorted(p.name for p in (APP / package).glob("*.py") if p.name != "__init__.py")
    assert [m for m in modules if f"`{m}`" not in text and f"{package}/{m}" not in text] == []


def test_the_architecture_names_each_package():
    text = (DOCS / "ARCHITECTURE.md").read_text()
    packages = sorted(p.name for p in APP.iterdir() if (p / "__init__.py").exists() and p.name != "migrations")
    assert [p for p in packages if f"`{p}/`" not in text] == []


def test_the_checker_finds_what_it_looks_for(tmp_path):
    assert name_problems(["lifecycle.validation", "lifecycle.workflows.refresh", "types.attempt_end"]) == [
        "lifecycle.validation",
        "types.attempt_end",
    ]
    assert name_problems(["limits.X", "job.status", "json.dumps", "datetime.max"]) == ["limits.X"]
    assert name_problems(["dependencies.settle"], "scheduler_app.lifecycle") == []
    assert file_problems(["scheduler_app/lifecycle/validation.py", "lifecycle/actions.py", "nowhere.py"], APP) == [
        "scheduler_app/lifecycle/validation.py",
        "nowhere.py",
    ]
    assert role_problems("as :func:`finish` does", "scheduler_app.lifecycle.transitions") == ["finish"]
    assert role_problems(":func:`settle`, :func:`workflows.progress`", "scheduler_app.lifecycle.dependencies") == []
    probe = tmp_path / "probe.md"
    probe.write_text("See [design](../../shared/DESIGN.md) and `sql.dialect.Dialect`, `sql.nothing`.\n")
    found = doc_findings(probe)
    assert [f.split(": ", 1)[1] for f in found] == ["sql.nothing", "link ../../shared/DESIGN.md"]
