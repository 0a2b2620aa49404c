"""Typed notebook parameters (aiplib/core/params.py) and the filter of make's arguments (papermill_args.py).

The conversions and refusals of :func:`coerce_parameter` with the values papermill really delivers;
the real notebooks' first cells (parameters cell, papermill's injected cell made by papermill's own
command line with ``--prepare-only``, then the check cell) run in an IPython shell; and the filter
that keeps, for one notebook, only the parameters it declares.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Literal, Optional

import nbformat
import pytest

from aiplib.core.papermill_args import MAKE_PARAMETERS, filter_papermill_args, main, notebook_parameters
from aiplib.core.params import ParameterTypeError, check_parameters, coerce_parameter

ROOT = Path(__file__).resolve().parents[1]
NBDIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NBDIR.glob("[0-9][0-9]_*.ipynb"))


# ---------------------------------------------------------------------------------------------
# coerce_parameter: accepted conversions, each with the value papermill gives

@pytest.mark.parametrize("value, annotation, expected", [
    (False, bool, False), ("false", bool, False), ("FALSE", bool, False), (" true ", bool, True),
    ("1", bool, True), ("0", bool, False), (1, bool, True), (0, bool, False),
    (20240917, int, 20240917), (5.0, int, 5), ("5", int, 5), ("-3", int, -3),
    (30, float, 30.0), (2.5, float, 2.5), ("2.5", float, 2.5), (float("inf"), float, float("inf")),
    ("whisper_tiny_en", str, "whisper_tiny_en"), ("", str, ""),
    ("competing_speech,channel", str, "competing_speech,channel"),  # make SUITE=… (-r suite)
    ([10, 5, 0], list[int], [10, 5, 0]), (10, list[int], [10]), ("10,5,0", list[int], [10, 5, 0]),
    ("[10, 5]", list[int], [10, 5]), ((10, 5), list[int], [10, 5]), ([10.0, "5"], list[int], [10, 5]),
    ("", list[int], []), ([1, "a"], list, [1, "a"]),
    ({}, dict[str, str], {}), ({"esc50": "http://m/esc50"}, dict[str, str], {"esc50": "http://m/esc50"}),
    (None, Optional[int], None), ("None", Optional[int], None), ("5", Optional[int], 5), (7, int | None, 7),
    ("fast", Literal["fast", "standard"], "fast"),
])
def test_accepted_values_and_their_conversion(value, annotation, expected):
    got = coerce_parameter("x", value, annotation)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value, annotation, message", [
    ("maybe", bool, "parameter 'x' is declared bool but received 'maybe' (str): use true/false "
                    "(e.g. -p NAME false)"),
    (2, bool, "parameter 'x' is declared bool but received 2 (int): use true/false (e.g. -p NAME false)"),
    (True, int, "parameter 'x' is declared int but received True (bool): give a whole number"),
    (5.5, int, "parameter 'x' is declared int but received 5.5 (float): give a whole number"),
    ("five", int, "parameter 'x' is declared int but received 'five' (str): give a whole number"),
    (float("nan"), float, "parameter 'x' is declared float but received nan (float): NaN is not a usable value"),
    ("loud", float, "parameter 'x' is declared float but received 'loud' (str): give a number"),
    (7, str, "parameter 'x' is declared str but received 7 (int): papermill's -p reads numbers, "
             "True/False/None as Python values; pass text with -r NAME VALUE"),
    ("ten", list[int], "parameter 'x' is declared list[int] but received 'ten' (str): parameter 'x[0]' is "
                       "declared int but received 'ten' (str): give a whole number; pass a list with -y 'NAME: [a, b]'"),
    (True, list[int], "parameter 'x' is declared list[int] but received True (bool): parameter 'x[0]' is "
                      "declared int but received True (bool): give a whole number; pass a list with -y 'NAME: [a, b]'"),
    ("http://m", dict[str, str], "parameter 'x' is declared dict[str, str] but received 'http://m' (str): "
                                 "pass a mapping with -y 'NAME: {key: value}'"),
    ("x", Optional[int], "parameter 'x' is declared Optional[int] but received 'x' (str)"),
    ("slow", Literal["fast", "standard"], "parameter 'x' is declared Literal['fast', 'standard'] but received "
                                          "'slow' (str): choose one of 'fast', 'standard'"),
])
def test_refused_values_give_one_line_naming_parameter_type_and_value(value, annotation, message):
    with pytest.raises(ParameterTypeError) as err:
        coerce_parameter("x", value, annotation)
    assert str(err.value) == message
    assert "\n" not in str(err.value)
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)  # AiplibParameterError


def test_check_parameters_converts_in_place_and_stops_at_the_first_wrong_type():
    ns = {"overwrite": "false", "snrs": 10, "seed": 3}
    check_parameters(ns, {"overwrite": bool, "snrs": list[int], "seed": int})
    assert ns == {"overwrite": False, "snrs": [10], "seed": 3}
    with pytest.raises(ParameterTypeError, match=r"^parameter 'seed' is declared int but received 'x' \(str\)"):
        check_parameters({"seed": "x"}, {"seed": int})
    with pytest.raises(ParameterTypeError, match="^parameter 'limit' is declared int but has no value$"):
        check_parameters({}, {"limit": int})


# ---------------------------------------------------------------------------------------------
# The real notebooks: parameters cell, papermill's injected cell, check cell — run in IPython

def _prepared(tmp_path: Path, stage: str, *args: str) -> nbformat.NotebookNode:
    """The notebook as papermill's command line parameterizes it (``--prepare-only``: no kernel)."""
    from click.testing import CliRunner
    from papermill.cli import papermill

    out = tmp_path / f"{stage}.prepared.ipynb"
    result = CliRunner().invoke(papermill, [str(NBDIR / f"{stage}.ipynb"), str(out), "--prepare-only", *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return nbformat.read(out, as_version=4)


def _run_first_cells(nb, monkeypatch) -> dict:
    """Run the cells up to the check cell (the one after parameters / injected-parameters)."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.delenv("AIP_SMOKE", raising=False)
    monkeypatch.setenv("AIP_PROFILE", "demo")
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    last = max(i for i, t in enumerate(tags) if "parameters" in t or "injected-parameters" in t) + 1
    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    for cell in nb.cells[:last + 1]:
        if cell.cell_type == "code":
            result = shell.run_cell(cell.source, silent=True)
            if result.error_in_exec is not None:
                raise result.error_in_exec
    return shell.user_ns


def test_injected_strings_and_scalars_arrive_typed(tmp_path, monkeypatch):
    nb = _prepared(tmp_path, "05_build_manifests", "-p", "overwrite", "false", "-p", "snrs", "10",
                   "-p", "smoke", "True")
    injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert 'overwrite = "false"' in injected.source and "snrs = 10" in injected.source  # papermill's typing
    ns = _run_first_cells(nb, monkeypatch)
    assert ns["overwrite"] is False and ns["snrs"] == [10] and ns["smoke"] is True


def test_wrong_type_stops_the_notebook_in_one_line(tmp_path, monkeypatch):
    nb = _prepared(tmp_path, "02_build_item_banks", "-r", "seed", "twelve")
    with pytest.raises(ParameterTypeError) as err:
        _run_first_cells(nb, monkeypatch)
    assert str(err.value) == ("parameter 'seed' is declared int but received 'twelve' (str): give a whole number")


@pytest.mark.parametrize("args, expected", [
    ((), {"n_inspection": 60, "n_wer_items": 8}),
    (("-p", "smoke", "true"), {"n_inspection": 6, "n_wer_items": 2}),  # the string "true"
    (("-p", "smoke", "true", "-p", "n_inspection", "3"), {"n_inspection": 3, "n_wer_items": 2}),
])
def test_injected_smoke_reaches_the_derived_defaults_of_06(tmp_path, monkeypatch, args, expected):
    ns = _run_first_cells(_prepared(tmp_path, "06_manipulation_checks", *args), monkeypatch)
    assert {k: ns[k] for k in expected} == expected


@pytest.mark.slow
def test_injected_smoke_reaches_the_bootstrap_size_of_09(tmp_path, monkeypatch):
    assert _run_first_cells(_prepared(tmp_path, "09_make_figures"), monkeypatch)["n_resamples"] == 2000
    assert _run_first_cells(_prepared(tmp_path, "09_make_figures", "-p", "smoke", "1"),
                            monkeypatch)["n_resamples"] == 200


def _parameters_cell(ipynb: Path):
    nb = nbformat.read(ipynb, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    return nb.cells[i], nb.cells[i + 1]


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_parameter_is_annotated_checked_and_not_derived(ipynb):
    from papermill import inspect_notebook

    cell, after = _parameters_cell(ipynb)
    tree = ast.parse(cell.source)
    annotated = [n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)]
    assert not [n for n in tree.body if isinstance(n, ast.Assign)], "every parameter has a declared type"
    # our reader and papermill's own inspection see the same parameters (so papermill never calls a
    # declared one unknown, e.g. an annotation its regex cannot read such as `int | None`)
    assert notebook_parameters(ipynb) == annotated == list(inspect_notebook(str(ipynb)))
    # no default is computed from another parameter: an injected value could not reach it
    for node in (n for n in tree.body if isinstance(n, ast.AnnAssign)):
        used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        assert not used & set(annotated), f"{node.target.id} is derived from {used & set(annotated)}"
    assert after.source.splitlines()[0].startswith("aiplib.check_parameters(globals())")


# ---------------------------------------------------------------------------------------------
# The filter of make's papermill arguments

def test_filter_keeps_declared_parameters_and_sorts_the_dropped_ones():
    args = ["-p", "profile", "demo", "-p", "model", "whisper_tiny_en", "-r", "texts", "/my data/t.csv",
            "-p", "snr", "10", "-y", "{snrs: [5], seed: 3}", "--log-output"]
    kept, dropped, unknown = filter_papermill_args(args, declared=["profile", "snrs", "texts"],
                                                   known=["profile", "snrs", "texts", "model", "seed"])
    assert kept == ["-p", "profile", "demo", "-r", "texts", "/my data/t.csv", "-y", "{snrs: [5]}", "--log-output"]
    assert dropped == ["model", "seed"] and unknown == ["snr"]
    kept, _, _ = filter_papermill_args(["-y", "{seed: 3}"], declared=["profile"])
    assert kept == []


def test_filter_on_a_real_notebook_drops_what_others_declare_and_stops_at_a_typo(capsysbinary):
    nb = NBDIR / "05_build_manifests.ipynb"
    assert notebook_parameters(nb) == ["profile", "smoke", "snrs", "overwrite", "seed_offset", "suite"]
    args = ["-p", "profile", "demo", "-p", "model", "m1", "-p", "task", "asr", "-y", "snrs: [10, 5]",
            "-r", "speech_dir", "/a b"]
    status = main(["filter-args", str(nb), *args])
    out, err = capsysbinary.readouterr()
    assert status == 0 and err == b""
    # model/task (stage 07 declares them) and speech_dir (stage 01) go silently
    assert out.split(b"\0")[:-1] == [b"-p", b"profile", b"demo", b"-y", b"snrs: [10, 5]"]
    # snr and limt are declared nowhere: the stage does not start, the closest names are offered
    status = main(["filter-args", str(nb), *args, "-p", "snr", "10", "-p", "limt", "5"])
    out, err = capsysbinary.readouterr()
    assert status == 2 and out == b""
    assert err.decode().splitlines() == [
        f"make: PARAMS: no notebook in {NBDIR} declares snr (did you mean snrs?), limt (did you mean "
        "limit?) (a parameter reaches only the notebooks whose parameters cell declares it)"]


def test_filter_refuses_an_option_without_its_values():
    from aiplib.core.errors import AiplibParameterError

    with pytest.raises(AiplibParameterError, match="needs NAME VALUE"):
        filter_papermill_args(["-p", "seed"], declared=["seed"])
    with pytest.raises(AiplibParameterError, match="needs a YAML mapping"):
        filter_papermill_args(["-y", "[1, 2]"], declared=["seed"])


def test_notebook_without_parameters_cell_declares_nothing(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x: int = 1")]
    nbformat.write(nb, tmp_path / "00_none.ipynb")
    assert notebook_parameters(tmp_path / "00_none.ipynb") == []
    assert json.loads((tmp_path / "00_none.ipynb").read_text())["cells"]


def test_the_parameters_make_passes_from_its_variables_are_never_refused_as_typos():
    """MAKE_PARAMETERS holds exactly the names the Makefile's PM_ARGS lines pass."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    passed = re.findall(r"^PM_ARGS [+:]= -[pr] ([a-z_]+)", makefile, flags=re.MULTILINE)
    assert passed == list(MAKE_PARAMETERS)
