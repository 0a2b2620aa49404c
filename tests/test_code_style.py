"""aiplib reads as plain code: ruff (line length 100, McCabe complexity 12) passes, no function is
above cyclomatic complexity 15 as radon counts it, the task families are asked through their spec
instead of compared by name, no private name crosses a module border, stage functions say what they
take (no ``**kwargs``), and no bare ``FAMILIES`` exists.

Each check is parametrised by stage package, so ``pytest tests/test_code_style.py -k stimuli`` checks
one package.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "aiplib"
STAGES = ["core", "io", "sources", "battery", "stimuli", "inference", "scoring", "analysis", "explore"]
MAX_COMPLEXITY = 15
TASK_NAMES = {"asr", "kws"}
SPEC_ONLY = {"delta_wer", "correct"}
SPEC_HOME = PKG / "core" / "tasks.py"


def _modules(stage: str) -> list[Path]:
    return sorted((PKG / stage).rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


@pytest.mark.parametrize("stage", STAGES)
def test_ruff_passes(stage):
    out = subprocess.run([_bin("ruff"), "check", "--no-cache", f"aiplib/{stage}"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.parametrize("stage", STAGES)
def test_no_function_above_complexity_15(stage):
    from radon.complexity import cc_visit

    too_complex = []
    for path in _modules(stage):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                too_complex.append(f"{path.relative_to(ROOT)}:{block.lineno} {block.name} "
                                   f"{block.complexity}")
    assert not too_complex, too_complex


def _task_name_comparisons(path: Path) -> list[str]:
    hits = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for operand in operands:
            if isinstance(operand, ast.Constant) and operand.value in TASK_NAMES:
                hits.append(_where(path, node))
            if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                names = [e.value for e in operand.elts if isinstance(e, ast.Constant)]
                if TASK_NAMES & set(names):
                    hits.append(_where(path, node))
    return hits


def test_task_names_are_compared_at_most_ten_times():
    hits = [hit for stage in STAGES for path in _modules(stage) for hit in _task_name_comparisons(path)]
    assert len(hits) <= 10, hits


@pytest.mark.parametrize("stage", STAGES)
def test_spec_columns_are_spelled_only_in_the_spec(stage):
    hits = []
    for path in _modules(stage):
        if path == SPEC_HOME:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and node.value in SPEC_ONLY:
                hits.append(f"{_where(path, node)} {node.value!r}")
    assert not hits, hits


@pytest.mark.parametrize("stage", STAGES)
def test_no_private_name_crosses_a_module_border(stage):
    hits = []
    for path in _modules(stage):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aiplib"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.endswith("__")]
                if private:
                    hits.append(f"{_where(path, node)} {node.module}: {private}")
    assert not hits, hits


@pytest.mark.parametrize("stage", STAGES)
def test_public_functions_take_no_kwargs(stage):
    hits = []
    for path in _modules(stage):
        for node in ast.walk(_tree(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.name.startswith("_") or node.args.kwarg is None:
                continue
            hits.append(f"{_where(path, node)} {node.name}(**{node.args.kwarg.arg})")
    assert not hits, hits


def test_no_name_families():
    hits = []
    for stage in STAGES:
        for path in _modules(stage):
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.Name) and node.id == "FAMILIES":
                    hits.append(_where(path, node))
                if isinstance(node, ast.alias) and "FAMILIES" in (node.name, node.asname):
                    hits.append(f"{path.relative_to(ROOT)} import {node.name}")
    assert not hits, hits
