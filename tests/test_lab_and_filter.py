"""What a JupyterLab session does to the tracked notebooks (issue 16, item 4).

- Opening or saving an unchanged notebook changes nothing: the committed metadata is what
  JupyterLab writes once the kernel of ``make setup`` starts (its kernelspec and the kernel's
  ``language_info``) and what jupytext's contents manager adds (the filters of ``jupytext.toml``).
  Before, each notebook held ``"display_name": "Python 3"`` and ``language_info: {"name":
  "python"}``; JupyterLab replaced both as soon as the kernel was up, so every notebook showed as
  modified on open, and a save rewrote the .ipynb.
- Outputs written in a session never reach git: ``make output-filter`` (run by ``make setup``)
  configures nbstripout as the git filter that ``.gitattributes`` names for ``*.ipynb``.
- ``make lab`` serves the project root, with the file browser opened at ``notebooks/``.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FILTER = [sys.executable, "-m", "nbstripout", "--keep-id"]   # as the Makefile's output-filter
needs_make = pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                                reason="needs GNU make and git")
# a 1x1 PNG: what a figure output looks like in the notebook JSON
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100ffff03000006000557bfabd40000000049454e44ae426082"
)).decode()


def _project_copy(root: Path, names=None) -> Path:
    """notebooks/ (all pairs, or the named stems) and jupytext.toml, as in the repository."""
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "jupytext.toml", root / "jupytext.toml")
    for nb in NOTEBOOKS:
        if names is None or nb.stem in names:
            shutil.copy(nb, root / "notebooks" / nb.name)
            shutil.copy(nb.with_suffix(".py"), root / "notebooks" / nb.with_suffix(".py").name)
    return root


def _kernel_display_name() -> str:
    m = re.search(r'ipykernel install --sys-prefix --name python3 --display-name "([^"]+)"',
                  (ROOT / "Makefile").read_text())
    assert m, "the Makefile's setup no longer installs the project kernel"
    assert f'--display-name "{m.group(1)}"' in (ROOT / "binder" / "postBuild").read_text()
    return m.group(1)


# ------------------------------------------------------------------- opening does not modify
def test_committed_metadata_is_what_jupyterlab_and_the_kernel_write():
    from ipykernel.ipkernel import IPythonKernel

    kernel = dict(IPythonKernel.language_info)           # what the kernel reports on start
    for path in NOTEBOOKS:
        meta = json.loads(path.read_text())["metadata"]
        assert meta["kernelspec"] == {"display_name": _kernel_display_name(), "language": "python",
                                      "name": "python3"}, path.name
        info = meta["language_info"]
        # the patch version is the reference interpreter's (Python 3.11 of `make setup`); another
        # 3.11.x makes JupyterLab rewrite it on open (tests/test_browser.py checks the match)
        assert {**info, "version": None} == {**kernel, "version": None}, path.name
        assert info["version"].startswith("3.11."), path.name
        assert meta["jupytext"] == {"cell_metadata_filter": "tags,-all", "formats": "ipynb,py:percent",
                                    "notebook_metadata_filter": "-all"}, path.name


def test_jupytext_contents_manager_opens_and_saves_unchanged(tmp_path):
    """JupyterLab's load + save through jupytext (as the jupyterlab_jupytext server extension
    does) leaves both files of every pair byte-identical."""
    root = _project_copy(tmp_path / "project")
    cm = jupytext.TextFileContentsManager(root_dir=str(root))
    for nb in NOTEBOOKS:
        ipynb, py = root / "notebooks" / nb.name, root / "notebooks" / nb.with_suffix(".py").name
        before = ipynb.read_bytes(), py.read_bytes()
        model = cm.get(f"notebooks/{nb.name}")
        assert model["content"]["metadata"] == json.loads(before[0])["metadata"], nb.name
        cm.save(model, f"notebooks/{nb.name}")
        assert (ipynb.read_bytes(), py.read_bytes()) == before, f"saving {nb.name} unchanged rewrote it"


@pytest.mark.slow
def test_jupytext_server_extension_is_enabled_in_the_environment():
    out = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                         capture_output=True, text=True, check=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)   # no colour codes
    assert re.search(r"jupyterlab_jupytext\s+enabled", text), text[-2000:]


# ------------------------------------------------------------------------------- make lab
def test_make_lab_serves_the_project_root_at_notebooks():
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "lab",
                          "DATA_ROOT=/tmp/elsewhere"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert f'--ServerApp.root_dir="{ROOT}"' in out
    assert '--LabApp.default_url="/lab/tree/notebooks"' in out
    assert 'AIP_DATA_ROOT="/tmp/elsewhere"' in out and "/tmp/elsewhere/demo/results/report.html" in out


# ---------------------------------------------------------------------------- output filter
@pytest.mark.slow
def test_committed_notebooks_are_fixed_points_of_the_filter():
    """Configuring the filter in a clone shows no notebook as modified."""
    for nb in NOTEBOOKS:
        out = subprocess.run([*FILTER, "-t"], input=nb.read_bytes(), capture_output=True, check=True)
        assert out.stdout == nb.read_bytes(), f"nbstripout would change {nb.name}"


def _git(repo: Path, *args, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          cwd=repo, capture_output=True, check=check)


def _session_writes_outputs(root: Path, rel: str, edit: str | None = None) -> None:
    """What a JupyterLab session saves: outputs, counts, widget state, through jupytext's CM."""
    cm = jupytext.TextFileContentsManager(root_dir=str(root))
    model = cm.get(rel)
    nb = nbformat.from_dict(model["content"])
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = n + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran cell {n}\n"),
                        nbformat.v4.new_output("display_data", data={"image/png": PNG,
                                                                     "text/plain": "<Figure>"})]
        cell.metadata["scrolled"] = True
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"x": 1}}}
    if edit:
        nb.cells[-1].source += edit
    cm.save({"type": "notebook", "format": "json", "content": nb}, rel)


@pytest.mark.slow
@needs_make
def test_git_stores_no_outputs_once_make_setup_configured_the_filter(tmp_path):
    stem = "04_extract_descriptors"
    rel = f"notebooks/{stem}.ipynb"
    repos = {}
    for name, configure in (("filtered", True), ("unfiltered", False)):
        repo = _project_copy(tmp_path / name, names={stem})
        shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
        _git(repo, "init", "-q")
        if configure:   # the recipe `make setup` runs, with this interpreter's nbstripout
            proc = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", str(repo),
                                   "output-filter", f"NBSTRIPOUT_PY={sys.executable}"],
                                  capture_output=True, text=True, check=True)
            assert "output filter: git strips outputs" in proc.stdout
            assert "--keep-id" in _git(repo, "config", "filter.nbstripout.clean").stdout.decode()
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", "clean notebooks")
        committed = (repo / rel).read_bytes()
        assert _git(repo, "status", "--porcelain", "-uno").stdout == b""       # nothing modified after setup
        _session_writes_outputs(repo, rel)
        nb = nbformat.read(repo / rel, as_version=4)
        assert sum(len(c.outputs) for c in nb.cells if c.cell_type == "code") > 0  # the working copy keeps them
        repos[name] = (repo, committed)

    # without the filter the outputs show up as a change; with it, git sees none
    repo, committed = repos["unfiltered"]
    assert _git(repo, "status", "--porcelain", "-uno").stdout.decode().split() == ["M", rel]
    repo, committed = repos["filtered"]
    assert _git(repo, "diff", "--quiet", check=False).returncode == 0   # content: no change
    assert _git(repo, "diff").stdout == b""
    # (`git status` lists the file until the next `git add` only because its size changed: git
    # trusts the size without running the filter; adding it stores nothing new)
    _git(repo, "add", rel)
    assert _git(repo, "status", "--porcelain", "-uno").stdout == b""
    assert _git(repo, "diff", "--cached", "--quiet", check=False).returncode == 0
    assert _git(repo, "show", f":{rel}").stdout == committed        # staged blob: the clean notebook
    assert b"image/png" in (repo / rel).read_bytes()                 # the working copy keeps its outputs

    # an edit in the same session is stored, its outputs are not; the .py pair carries the edit
    _session_writes_outputs(repo, rel, edit="\nprint('edited')")
    diff = _git(repo, "diff").stdout.decode()
    assert "print('edited')" in diff and "ran cell" not in diff and "image/png" not in diff
    _git(repo, "add", "notebooks")
    _git(repo, "commit", "-q", "-m", "edit")
    stored = nbformat.reads(_git(repo, "show", f"HEAD:{rel}").stdout.decode(), as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None and "scrolled" not in c.metadata for c in code)
    assert "widgets" not in stored.metadata
    assert stored.cells[-1].source.endswith("print('edited')")
    assert [c.id for c in stored.cells] == [c.id for c in nbformat.read(ROOT / rel, as_version=4).cells]
    assert "print('edited')" in _git(repo, "show", f"HEAD:notebooks/{stem}.py").stdout.decode()
    assert json.loads(_git(repo, "show", f"HEAD:{rel}").stdout)["metadata"] == \
        json.loads((ROOT / rel).read_text())["metadata"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@needs_make
def test_make_lab_runs_as_root_headless_with_lab_args(tmp_path):
    """`make lab LAB_ARGS=…` as the user the suite runs as (root in a container: --allow-root is
    added, without which JupyterLab refuses to start) serves the Lab page on 127.0.0.1."""
    import os
    import signal
    import time
    import urllib.request

    dry = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "lab",
                          "LAB_ARGS=--no-browser"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert ("--allow-root" in dry) == (os.getuid() == 0)
    assert dry.rstrip().endswith("--no-browser")
    port = _free_port()
    args = f"--no-browser --ip 127.0.0.1 --port {port} --IdentityProvider.token=aiptest"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    proc = subprocess.Popen(["make", "--no-print-directory", "-o", ".venv/.installed", "-o", "setup",
                             "lab", f"DATA_ROOT={tmp_path / 'data'}", f"LAB_ARGS={args}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        page, deadline = None, time.monotonic() + 90
        while page is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=aiptest",
                                            timeout=5) as r:
                    page = (r.status, r.read().decode())
            except OSError:
                time.sleep(0.5)
        assert page is not None, f"make lab did not serve (exit {proc.poll()})"
        assert page[0] == 200 and "JupyterLab" in page[1]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ---------------------------------------------------------------- make from a subfolder, git
@needs_make
@pytest.mark.parametrize("folder", ["notebooks", "docs", "tests"])
def test_make_from_a_subfolder_says_make_dash_c_in_one_line(folder):
    for goals, shown in (([], "make -C .. all"), (["07", "report"], "make -C .. 07 report")):
        # as a user types it: not inside `make test`'s own make (MAKELEVEL makes make print
        # "Entering directory" lines)
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        run = subprocess.run(["make", *goals], cwd=ROOT / folder, capture_output=True, text=True, env=env)
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr == (f"Makefile:2: *** run make from the project root: '{shown}'.  Stop.\n")


@needs_make
def test_a_relative_data_root_named_data_dash_is_ignored_by_git(tmp_path):
    repo = tmp_path / "clone"
    repo.mkdir()
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    for rel in ("data-mine/demo/results/report.html", "data_2/demo/x.csv", "data/demo/y.csv",
                "notebooks/keep.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    assert sorted(out.splitlines()) == ["?? .gitignore", "?? notebooks/keep.py"]
