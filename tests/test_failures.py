"""A failure says why on its last line and leaves a known state (issue #37): the whole message on the
FAILED line, a stop signal to make that ends the stage and its kernel before the lock is released,
`make clean` under the data folder's lock, and a lock file that cannot be written in one line.

Real processes throughout: scripts/run_stage.sh, make, papermill and a Jupyter kernel, real signals
and real files (the notebooks are tiny ones written into a temporary NOTEBOOKS= folder)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from test_custom import make_inputs, voice_like, write

from aiplib.core.errors import AiplibError, ModelUnavailableError
from aiplib.core.lock import LOCK_FILE_STATUS, LOCK_NAME, acquire, run_pids
from aiplib.core.workspace import workspace
from aiplib.inference.runner import raise_if_not_run
from aiplib.sources.corpora import custom

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
needs_venv = pytest.mark.skipif(not (VENV / "bin" / "papermill").exists(), reason="needs the project's .venv")
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _notebook(nbdir: Path, stage: str, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbdir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(nbdir / f"{stage}.ipynb"))


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIP_LOCK", "AIP_STAGE", "AIP_DATA_ROOT", "AIP_PROFILE", "MAKE"))}
    env.update(PYTHONPATH=str(REPO), PAPERMILL=str(VENV / "bin" / "papermill"),
               FILTER_PYTHON=str(VENV / "bin" / "python"), AIP_PROFILE="demo")
    env.update(extra)
    return env


def _stage(stage: str, nbdir: Path, out: Path, env: dict | None = None, timeout: float = 600):
    return subprocess.run(["bash", str(REPO / "scripts" / "run_stage.sh"), stage, str(nbdir), str(out)],
                          env=env or _env(), capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- the whole reason
def test_not_run_models_are_one_line_with_every_reason():
    summary = pd.DataFrame([
        {"model": "whisper_tiny_en", "task": "asr", "status": "done", "error": None},
        {"model": "mine", "task": "asr", "status": "unavailable",
         "error": "mine: program 'whisper-cli' not found (not on PATH or not executable)"},
        {"model": "api", "task": "asr", "status": "unavailable",
         "error": "api: set the environment variable MY_KEY to the endpoint's API key"},
        {"model": "local", "task": "kws", "status": "unavailable",
         "error": "local: weights folder /nope/ckpt does not exist\n(a hub id is 'name')"},
    ])
    with pytest.raises(ModelUnavailableError) as exc:
        raise_if_not_run(summary)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg == ("not run: mine / asr: unavailable — mine: program 'whisper-cli' not found (not on PATH or "
                   "not executable); api / asr: unavailable — api: set the environment variable MY_KEY to the "
                   "endpoint's API key; local / kws: unavailable — local: weights folder /nope/ckpt does not "
                   "exist (a hub id is 'name')")


def test_changed_inputs_are_named_on_one_line(tmp_path, capsys):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        custom.gather_raw(ws, **params)
    sp, kw = Path(params["speech_dir"]), Path(params["kws_dir"])
    write(sp / "a.wav", voice_like(1.5, f0=300))
    with pytest.raises(AiplibError) as exc:
        custom.build_item_banks(ws, overwrite=True)
    assert str(exc.value) == ("these input files changed since stage 1; re-run stage 1 to validate them again: "
                              f"{sp / 'a.wav'} (changed)")
    (sp / "sub" / "b.flac").unlink()
    for i, w in enumerate(["yes", "go", "cat", "happy", "seq"]):
        write(kw / f"{w}.wav", voice_like(1.0, f0=400 + 10 * i))
    capsys.readouterr()
    with pytest.raises(AiplibError) as exc:
        custom.build_item_banks(ws, overwrite=True)
    msg = str(exc.value)
    assert "\n" not in msg and msg.count(" (changed)") + msg.count(" (gone)") == 5
    assert f"{sp / 'sub' / 'b.flac'} (gone)" in msg
    assert msg.endswith(" and 1 more (all 6 are listed above it on stderr, in the stage's log)")
    listed = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("changed since stage 1: ")]
    assert len(listed) == 6 and f"changed since stage 1: {kw / 'happy.wav'} (changed)" in listed


@pytest.mark.slow
@needs_venv
def test_failed_line_carries_the_whole_multiline_message(tmp_path):
    nbdir, out = tmp_path / "nbs", tmp_path / "data" / "demo" / "executed"
    lines = [f"model_{i} / asr: unavailable — program tool_{i} not on PATH" for i in range(10)]
    _notebook(nbdir, "05_fail", "x = 1",
              "from aiplib.core.errors import ModelUnavailableError\n"
              f"raise ModelUnavailableError('not run:\\n' + '\\n'.join({lines[:2]!r}))")
    _notebook(nbdir, "06_long", "from aiplib.core.errors import AiplibError\n"
              f"raise AiplibError('these input files changed since stage 1:\\n  ' + '\\n  '.join({lines!r}))")
    r = _stage("05_fail", nbdir, out)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"make: stage 05_fail FAILED: ModelUnavailableError: not run: {lines[0]}; {lines[1]} — "
                           "finished work is kept"), r.stderr
    r = _stage("06_long", nbdir, out)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1
    assert last.startswith("make: stage 06_long FAILED: AiplibError: these input files changed since stage 1: "
                           + "; ".join(lines[:6]) + f" ... and 4 more lines (the whole message is in "
                           f"{out / '06_long.log'}) — finished work is kept"), r.stderr
    assert all(ln in (out / "06_long.log").read_text() for ln in lines)


# ----------------------------------------------------------------------------- a lock file it cannot write
def _unprivileged() -> tuple[list[str], str, str] | None:
    """(command prefix, python, extra PYTHONPATH) of a user the file permissions apply to; None if there is
    none (root without setpriv). Root's venv Python may sit in a folder other users cannot enter, so the
    system Python with the venv's packages on its path runs the lock there (the lock needs no binary)."""
    if os.geteuid() != 0:
        return [], str(VENV / "bin" / "python"), ""
    if not shutil.which("setpriv") or not Path("/usr/bin/python3").exists():
        return None
    site = VENV / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"], "/usr/bin/python3", str(site)


@pytest.mark.parametrize("case", ["read-only lock file", "read-only data folder"])
def test_a_lock_file_that_cannot_be_written_ends_in_one_line(case):
    who = _unprivileged()
    if who is None:
        pytest.skip("running as root without setpriv: permissions do not apply")
    prefix, python, site = who
    root = Path(tempfile.mkdtemp(prefix="aip-lockfile-"))  # pytest's tmp_path may be closed to other users
    try:
        _lock_file_case(root, case, prefix, python, site)
    finally:
        for d in [root, *root.rglob("*")]:
            if d.is_dir():
                d.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)


def _lock_file_case(root: Path, case: str, prefix: list[str], python: str, site: str) -> None:
    root.chmod(0o755)
    ws = root / "data" / "demo"
    out = ws / "executed"
    out.mkdir(parents=True)
    for d in (root / "data", ws, out):
        d.chmod(0o777)
    if case == "read-only lock file":
        (ws / LOCK_NAME).write_text("")
        (ws / LOCK_NAME).chmod(0o444)
    else:
        ws.chmod(0o555)  # no lock file yet, and none can be created
    env = _env(FILTER_PYTHON=python, PAPERMILL="/nonexistent/papermill", HOME=str(root),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), site) if p))
    probe = subprocess.run([*prefix, python, "-c", "import aiplib.core.lock"], env=env, capture_output=True,
                           text=True, cwd=root)
    if probe.returncode != 0:
        pytest.skip(f"the unprivileged user cannot import aiplib: {probe.stderr[-300:]}")
    r = subprocess.run([*prefix, "bash", str(REPO / "scripts" / "run_stage.sh"), "05_x", str(root), str(out)],
                       env=env, capture_output=True, text=True, timeout=120, cwd=root)
    assert r.returncode == LOCK_FILE_STATUS, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0] == (f"make: data folder {ws}: cannot write its lock file {ws / LOCK_NAME} (Permission denied); "
                        f"nothing was run: give yourself write permission to {ws} and {LOCK_NAME} in it "
                        "(chmod u+w), then run the same command again")


# ----------------------------------------------------------------------------- stop signals, make clean
def _make(target: str, nbdir: Path, data_root: Path) -> list[str]:
    return ["make", "--no-print-directory", "-o", ".venv/.installed", "-o", "setup", target,
            f"NOTEBOOKS={nbdir}", f"DATA_ROOT={data_root}"]


def _holding_stage(nbdir: Path, started: Path, hold: Path) -> None:
    """Stage 01 of a NOTEBOOKS folder: says it started, then runs while ``hold`` exists (2 min at most)."""
    _notebook(nbdir, "01_download_data",
              "import os, pathlib, time\n"
              f"pathlib.Path({str(started)!r}).write_text(str(os.getpid()))\n"
              "t0 = time.monotonic()\n"
              f"while pathlib.Path({str(hold)!r}).exists() and time.monotonic() - t0 < 120:\n"
              "    time.sleep(0.1)\n"
              "print('finished')")


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    t0 = time.monotonic()
    while not (path.exists() and path.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, f"{path} never appeared"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.slow
@needs_venv
@needs_make
@pytest.mark.parametrize("how", ["SIGTERM to make", "SIGINT to make's process group"])
def test_stop_signal_to_make_all_ends_the_stage_and_its_kernel_then_frees_the_lock(tmp_path, how):
    nbdir, data_root = tmp_path / "nbs", tmp_path / "data"
    ws = data_root / "demo"
    started, hold = tmp_path / "started", tmp_path / "hold"
    hold.write_text("")
    _holding_stage(nbdir, started, hold)
    env = _env()
    make = subprocess.Popen(_make("all", nbdir, data_root), cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(started, make)
        kernel = int(started.read_text())
        rec = json.loads((ws / LOCK_NAME).read_text())
        run = run_pids(rec["token"])
        assert kernel in run and len(run) >= 5  # run-stage, the stage's lock, bash, papermill, the kernel ...
        # make clean while the stage runs: one line naming the holder, nothing deleted
        clean = subprocess.run(_make("clean", nbdir, data_root), cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=120)
        assert clean.returncode != 0
        refusal = [ln for ln in clean.stderr.splitlines() if not ln.startswith("make: ***")]
        assert len(refusal) == 1 and refusal[0].startswith(
            f"make: data folder {ws} is in use by pid {rec['pid']} on host "), clean.stderr
        assert "(exclusive: make all PROFILE=demo, since " in refusal[0]
        assert (ws / "executed" / "01_download_data.log").is_file()

        t0 = time.monotonic()
        if how == "SIGTERM to make":
            make.send_signal(signal.SIGTERM)
        else:
            os.killpg(make.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        # while anything of the run is left, the holder record stays valid (and the flock held)
        while run_pids(rec["token"]):
            text = (ws / LOCK_NAME).read_text()
            assert text and json.loads(text)["token"] == rec["token"], "record emptied while the run goes on"
            assert time.monotonic() - t0 < 60, f"still running: {run_pids(rec['token'])}"
            time.sleep(0.05)
        _, err = make.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        hold.unlink(missing_ok=True)
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert make.returncode != 0
    assert took < 30, took
    assert not any(_alive(p) for p in [kernel, rec["pid"], *run]), [p for p in run if _alive(p)]
    name = "SIGTERM" if how.startswith("SIGTERM") else "SIGINT"
    stop_line = [ln for ln in err.splitlines() if ln.startswith("make: stage 01_download_data")]
    assert stop_line == [f"make: stage 01_download_data STOPPED by {name} (papermill and its kernel have ended); "
                         "finished work is kept, so re-running `make 01` with the same variables resumes where it "
                         "stopped"], err
    assert (ws / LOCK_NAME).read_text() == ""
    fd, *_ = acquire(ws, command="the next run")  # free: the next run starts at once
    os.close(fd)
    assert (ws / "executed" / "01_download_data.failed.ipynb").is_file()
    assert not (ws / "executed" / "01_download_data.running.ipynb").exists()
    # and once nothing runs, make clean removes the folder
    clean = subprocess.run(_make("clean", nbdir, data_root), cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=120)
    assert clean.returncode == 0, clean.stderr
    assert not ws.exists()
