"""aiplib's shape: stage packages only at the top level, imports one way (the import-linter
contract in pyproject.toml), no import cycle among aiplib modules counting imports written inside
functions, and no aiplib import inside a function (an import inside a function is for a heavy
optional third-party library only)."""
import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "aiplib"
STAGES = ["core", "io", "sources", "battery", "stimuli", "inference", "scoring", "analysis", "explore"]


def test_top_level_holds_only_the_stage_packages():
    entries = sorted(p.name for p in PKG.iterdir() if p.name != "__pycache__")
    assert entries == sorted(["__init__.py", *STAGES])
    assert all((PKG / s / "__init__.py").is_file() for s in STAGES)


def test_import_contracts_are_kept():
    out = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "2 kept, 0 broken" in out.stdout  # layers; stimuli does not score (forbidden)


def _sccs(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return comps


def test_no_import_cycle_among_aiplib_modules():
    g = grimp.build_graph("aiplib", cache_dir=None)
    graph = {}
    for m in g.modules:
        deps = g.find_modules_directly_imported_by(m)
        # a package's __init__ re-exporting its own submodules is not a cycle edge
        graph[m] = {d for d in deps if not d.startswith(m + ".")}
    assert len(graph) > 50
    assert _sccs(graph) == []


def test_a_cycle_would_be_found():
    assert _sccs({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.slow
def test_no_aiplib_import_inside_a_function():
    found = []
    for f in sorted(PKG.rglob("*.py")):
        for fn in ast.walk(ast.parse(f.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    mod = n.module if isinstance(n, ast.ImportFrom) else None
                    names = [a.name for a in n.names] if isinstance(n, (ast.Import, ast.ImportFrom)) else []
                    if (isinstance(n, ast.ImportFrom) and (n.level or (mod or "").startswith("aiplib"))) or \
                            any(x.startswith("aiplib") for x in names if isinstance(n, ast.Import)):
                        found.append(f"{f.relative_to(ROOT)}:{n.lineno}")
    assert found == []


def _functions():
    for f in sorted(PKG.rglob("*.py")):
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f, n


def test_no_function_takes_more_than_eight_parameters():
    """Positional and required parameters count; keyword-only options with a default do not (they are
    named at every call, as a config dataclass's fields would be)."""
    many = []
    for f, n in _functions():
        a = n.args
        required_keywords = [d for d in a.kw_defaults if d is None]
        k = len(a.posonlyargs) + len(a.args) + len(required_keywords) + bool(a.vararg) + bool(a.kwarg)
        if a.args and a.args[0].arg in ("self", "cls"):
            k -= 1
        if k > 8:
            many.append(f"{f.relative_to(ROOT)}:{n.lineno} {n.name}({k})")
    assert many == []


@pytest.mark.slow
def test_only_the_explorer_ui_imports_matplotlib():
    importers = set()
    for f in sorted(PKG.rglob("*.py")):
        for n in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            if any(x.split(".")[0] == "matplotlib" for x in names):
                importers.add(str(f.relative_to(ROOT)))
    assert importers <= {"aiplib/explore/ui.py"}


def test_architecture_map_names_every_module():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    start = text.index("```text\naiplib/")
    tree = text[start:text.index("```\n", start + 10)]
    missing = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel.name == "__main__.py" or len(rel.parts) == 1:
            continue
        sub = rel.relative_to(rel.parts[0])
        name = f"{sub.parent}/" if f.name == "__init__.py" else str(sub)
        if f.name == "__init__.py" and len(rel.parts) == 2:
            name = f"{rel.parts[0]}/"
        if f" {name} " not in tree:
            missing.append(str(rel))
    assert missing == []


# ------------------------------------------------------------------------------ registries
#: Registries by name that are not written as a mapping literal (always counted).
KNOWN_REGISTRIES = {"TASK_FAMILIES", "CONDITION_FAMILIES", "MIXERS", "FAMILY_SCORERS", "FAMILY_TABLES",
                    "CONDITION_LISTINGS", "LEAK_RULES", "SCORERS", "TABLE_FAMILIES"}
MAPPING_CALLS = {"MappingProxyType", "dict", "OrderedDict", "defaultdict"}


def _is_mapping(value: ast.AST) -> bool:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in MAPPING_CALLS
    return False


def _registry_names(tree: ast.Module) -> set:
    """Public upper-case names a module binds at its top level to a mapping (or a known registry)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            targets = [node.target.id]
        else:
            continue
        for name in targets:
            if name.startswith("_") or not name.isupper():
                continue
            if name in KNOWN_REGISTRIES or _is_mapping(node.value):
                names.add(name)
    return names


def _defined_twice(sources: dict) -> dict:
    """Registry name → the modules that define it, for the names defined in more than one."""
    where = {}
    for module, text in sources.items():
        for name in _registry_names(ast.parse(text)):
            where.setdefault(name, []).append(module)
    return {name: mods for name, mods in where.items() if len(mods) > 1}


def test_no_registry_name_is_defined_in_two_modules():
    sources = {str(f.relative_to(ROOT)): f.read_text() for f in sorted(PKG.rglob("*.py"))}
    assert _defined_twice(sources) == {}


def test_a_registry_defined_twice_would_be_found():
    one = "from types import MappingProxyType\nMIXERS = MappingProxyType({'a': 1})\n_PRIVATE = {}\n"
    two = "MIXERS = {'b': 2}\nLIMIT = 3\n"
    three = "FAMILY_TABLES = make()\n"
    assert _defined_twice({"a.py": one, "b.py": two, "c.py": three, "d.py": three}) == {
        "MIXERS": ["a.py", "b.py"], "FAMILY_TABLES": ["c.py", "d.py"]}
