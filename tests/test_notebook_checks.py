"""A broken rule stops `make test` in the notebook that applies it, in that notebook's Checks cell.

A smoke workspace of notebooks 01–06, each past its own checks, is copied from the session's
smoke `make all` (tests/conftest.py, ``smoke_demo_root``). Then one rule is broken on purpose by a
``sitecustomize`` module that the test writes and puts on the kernel's ``PYTHONPATH`` (nothing in aiplib knows about it):

* the mixer's background gain 1 dB too high (the target SNR handed to the mixing step lowered by
  1 dB) → notebook 06 stops on the achieved-SNR rule;
* one manifest row dropped when stage 5 writes the manifest → notebook 05 stops on the rule
  1 + n_backgrounds × n_SNRs rows per item.
"""
from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from notebook_run import run_notebook

pytestmark = pytest.mark.slow

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

GAIN_PLUS_1DB = """
import aiplib.stimuli.mixing as _m
_mix = _m.mix_normalized
def _louder(s, bg, snr_db, seed, *, span=None):  # background 1 dB louder than the rule
    return _mix(s, bg, float(snr_db) - 1.0, seed, span=span)
_m.mix_normalized = _louder
"""

DROP_ONE_ROW = """
import aiplib.stimuli.manifests as _mf
_write = _mf.write_manifest_rows
def _drop(rows, columns, out):  # the sixth row (a mixture of the first item) is lost
    return _write(rows[:5] + rows[6:], columns, out)
_mf.write_manifest_rows = _drop
"""


def _run(stage, data_root, out_dir, *, shim=None, **params):
    """Execute ``notebooks/<stage>.ipynb`` with papermill in ``data_root`` (smoke, demo profile)."""
    env = {"AIP_DATA_ROOT": str(data_root), "AIP_PROFILE": "demo", "AIP_SMOKE": "1"}
    if shim is not None:
        shim_dir = Path(out_dir) / "shim"
        shim_dir.mkdir(parents=True, exist_ok=True)
        (shim_dir / "sitecustomize.py").write_text(textwrap.dedent(shim))
        env["PYTHONPATH"] = os.pathsep.join([str(shim_dir)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return run_notebook(stage, Path(out_dir) / f"{stage}.ipynb", parameters={"profile": "demo", **params}, env=env,
                        kernel_name="python3")


@pytest.fixture(scope="module")
def smoke_root(smoke_demo_root, tmp_path_factory):
    """A data root whose demo workspace has passed stages 01–06 and their checks at smoke size: a copy
    of the session's smoke run (conftest.smoke_demo_root, which `make` ran with papermill and whose
    every stage passed its checks) without what stages 07–10 wrote and without the executed records."""
    root = tmp_path_factory.mktemp("nbchecks") / "data"
    shutil.copytree(smoke_demo_root, root, symlinks=True,
                    ignore=shutil.ignore_patterns("inference", "results", "executed"))
    return root


def _failure(stage, root, tmp_path, shim, **params):
    """Run ``stage`` with ``shim``; the PapermillExecutionError and the source of the failing cell."""
    import nbformat
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as err:
        _run(stage, root, tmp_path, shim=shim, **params)
    nb = nbformat.read(str(tmp_path / f"{stage}.ipynb"), as_version=4)
    cells = [c for c in nb.cells if "papermill-error-cell" not in c.source]  # papermill's own banner
    failing = next(i for i, c in enumerate(cells) if c.cell_type == "code"
                   and any(o.get("output_type") == "error" for o in c.get("outputs", [])))
    heading = next(c.source for c in reversed(cells[:failing]) if c.cell_type == "markdown")
    return err.value, cells[failing].source, heading


def test_mixer_gain_one_db_high_fails_notebook_06_checks(smoke_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(smoke_root, root, symlinks=True)
    exc, source, heading = _failure("06_manipulation_checks", root, tmp_path, GAIN_PLUS_1DB)
    assert exc.ename == "AssertionError"
    assert "achieved SNR off by more than 0.1 dB in 120 of 120 (background, SNR) cells" in exc.evalue
    assert "achieved " in exc.evalue and "(max error 1.000 dB)" in exc.evalue  # the 1 dB, measured
    assert heading.startswith("## Checks") and "achieved SNR off by more than" in source


def test_dropped_manifest_row_fails_notebook_05_checks(smoke_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(smoke_root, root, symlinks=True)
    exc, source, heading = _failure("05_build_manifests", root, tmp_path, DROP_ONE_ROW, overwrite=True)
    assert exc.ename == "AssertionError"
    assert "manifests/asr.csv: item " in exc.evalue
    assert "has 60 rows; the rule is 1 + 20 backgrounds × 3 SNRs = 61 (1 items break it)" in exc.evalue
    assert heading.startswith("## Checks") and "the rule is" in source
