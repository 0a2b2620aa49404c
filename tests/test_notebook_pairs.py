"""The notebooks are the source: each ``notebooks/NN_*.ipynb`` is paired by jupytext with a
percent-format ``NN_*.py``; the two must hold the same cells, and an edit to either one reaches
the other through ``jupytext --sync`` (what JupyterLab's jupytext contents manager does on save)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _cells(nb) -> list[tuple[str, str, tuple]]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", ()))) for c in nb.cells]


def test_ten_notebooks_each_with_its_py_pair():
    assert [p.stem[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 11)]
    for p in NOTEBOOKS:
        assert p.with_suffix(".py").is_file(), f"{p.name} has no .py pair"


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_holds_the_same_cells_and_no_outputs(ipynb):
    nb = nbformat.read(ipynb, as_version=4)
    py = jupytext.read(ipynb.with_suffix(".py"))
    assert _cells(nb) == _cells(py), f"{ipynb.name} and its .py differ: run `make sync-notebooks`"
    assert sum("parameters" in c.metadata.get("tags", ()) for c in nb.cells) == 1
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{ipynb.name} has outputs in git"


def _sync(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", str(path)], check=True)


@pytest.mark.slow
def test_edit_in_py_reaches_ipynb_and_back(tmp_path):
    shutil.copy(ROOT / "jupytext.toml", tmp_path)
    src = ROOT / "notebooks" / "04_extract_descriptors"
    py, ipynb = tmp_path / "04.py", tmp_path / "04.ipynb"
    shutil.copy(src.with_suffix(".py"), py)
    shutil.copy(src.with_suffix(".ipynb"), ipynb)
    # edit the script; make it newer than the notebook, then sync
    py.write_text(py.read_text() + '\n# %%\nprint("edited in the .py")\n')
    _sync(py)
    nb = nbformat.read(ipynb, as_version=4)
    assert nb.cells[-1].source == 'print("edited in the .py")'
    # edit the notebook; sync carries it to the script
    nb.cells.append(nbformat.v4.new_markdown_cell("Edited in **JupyterLab**."))
    nbformat.write(nb, ipynb)
    import os
    import time
    later = time.time() + 5
    os.utime(ipynb, (later, later))
    _sync(ipynb)
    assert py.read_text().rstrip().endswith("# Edited in **JupyterLab**.")
