"""One writer per data folder (aiplib.core.lock): exclusive and shard modes, stale locks, two real
stage runs of one folder through scripts/run_stage.sh, a stop signal that ends the whole run before the
lock is released, and a lock file deleted (make clean) while a run waits for it."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from aiplib.core.lock import (
    BUSY_STATUS,
    LOCK_NAME,
    FolderBusyError,
    acquire,
    holders,
    run,
    run_pids,
)

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
needs_venv = pytest.mark.skipif(not (VENV / "bin" / "papermill").exists(), reason="needs the project's .venv")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_second_exclusive_holder_is_refused_naming_the_first(tmp_path):
    fd, rec, _, old = acquire(tmp_path, command="make all PROFILE=demo")
    try:
        assert old is None and rec["pid"] == os.getpid() and rec["host"] == socket.gethostname()
        assert json.loads((tmp_path / LOCK_NAME).read_text())["command"] == "make all PROFILE=demo"
        with pytest.raises(FolderBusyError) as e:
            acquire(tmp_path, command="stage 05")
        msg = str(e.value)
        assert "\n" not in msg
        assert f"in use by pid {os.getpid()} on host {socket.gethostname()} (exclusive: make all PROFILE=demo" in msg
        with pytest.raises(FolderBusyError):
            acquire(tmp_path, mode="shard", command="stage 07 shard")
        t0 = time.monotonic()
        with pytest.raises(FolderBusyError):
            acquire(tmp_path, command="stage 05", wait_s=0.6, poll_s=0.1)  # waits, then gives up
        assert time.monotonic() - t0 >= 0.6
    finally:
        os.close(fd)


def test_shards_share_the_folder_and_keep_stages_out(tmp_path):
    a = acquire(tmp_path, mode="shard", command="stage 07 shard 0/2")
    b = acquire(tmp_path, mode="shard", command="stage 07 shard 1/2")  # no error: shards run together
    try:
        assert sorted(r["command"] for r in holders(tmp_path)) == ["stage 07 shard 0/2", "stage 07 shard 1/2"]
        with pytest.raises(FolderBusyError, match=r"shard: stage 07 shard 0/2.*shard: stage 07 shard 1/2"):
            acquire(tmp_path, command="stage 08")
    finally:
        os.close(a[0])
        os.close(b[0])
    fd, *_ = acquire(tmp_path, command="stage 08")  # both gone: the stage runs
    os.close(fd)


def test_stale_lock_of_a_dead_pid_is_taken_over(tmp_path, capfd):
    dead = _dead_pid()
    (tmp_path / LOCK_NAME).write_text(json.dumps(dict(pid=dead, host=socket.gethostname(), command="make all",
                                                      mode="exclusive", started="2026-01-01T00:00:00Z", token="x")))
    (tmp_path / f"{LOCK_NAME}.d").mkdir()
    (tmp_path / f"{LOCK_NAME}.d" / "h-1.json").write_text(json.dumps(dict(pid=dead, host=socket.gethostname(),
                                                                         mode="shard", command="old shard")))
    assert [r["command"] for r in holders(tmp_path)] == ["make all"]  # the dead shard's record is removed
    status = run(tmp_path, [sys.executable, "-c", "import os; print(os.environ['AIP_LOCK_HELD'])"], command="stage 03")
    assert status == 0
    err = capfd.readouterr().err
    assert f"took over the stale lock of {tmp_path} left by pid {dead}" in err and "which ended" in err
    assert (tmp_path / LOCK_NAME).read_text() == ""  # released on exit


def test_nested_run_inside_the_holder_runs_at_once(tmp_path):
    inner = (f"import sys; from aiplib.core.lock import run; "
             f"sys.exit(run({str(tmp_path)!r}, [sys.executable, '-c', 'pass'], command='stage 01'))")
    assert run(tmp_path, [sys.executable, "-c", inner], command="make all") == 0


def _sleeping_stage(nbdir: Path, stage: str, marker: Path, hold: Path) -> None:
    """A stage that writes ``marker``, then runs while ``hold`` exists (2 min at most): the test decides
    when it ends, however long a loaded machine takes to start the next run."""
    hold.write_text("")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import time, pathlib\npathlib.Path({str(marker)!r}).write_text('started')\n"
                                          f"t0 = time.monotonic()\nwhile pathlib.Path({str(hold)!r}).exists() and "
                                          "time.monotonic() - t0 < 120:\n    time.sleep(0.1)\nprint('finished')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbdir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(nbdir / f"{stage}.ipynb"))


def _stage_cmd(stage, nbdir, out):
    return ["bash", str(REPO / "scripts" / "run_stage.sh"), stage, str(nbdir), str(out)]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIP_LOCK", "AIP_STAGE", "MAKE"))}
    env.update(PYTHONPATH=str(REPO), PAPERMILL=str(VENV / "bin" / "papermill"),
               FILTER_PYTHON=str(VENV / "bin" / "python"), **extra)
    return env


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert time.monotonic() - t0 < timeout, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.slow
@needs_venv
def test_two_stage_runs_on_one_folder_second_stops_with_one_line(tmp_path):
    ws = tmp_path / "data" / "demo"
    out, nbdir, marker = ws / "executed", tmp_path / "nbs", tmp_path / "started"
    hold = tmp_path / "hold"
    _sleeping_stage(nbdir, "05_slow", marker, hold)
    first = subprocess.Popen(_stage_cmd("05_slow", nbdir, out), env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    waiting = None
    try:
        _wait_for(marker)
        second = subprocess.run(_stage_cmd("05_slow", nbdir, out), env=_env(), capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == BUSY_STATUS
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert lines[0].startswith(f"make: data folder {ws} is in use by pid {first.pid} on host "
                                   f"{socket.gethostname()} (exclusive: stage 05_slow (profile demo), since ")
        assert "LOCK_WAIT=<seconds>" in lines[0]
        # waiting for it instead: runs once the first has finished
        waiting = subprocess.Popen(_stage_cmd("05_slow", nbdir, out), env=_env(AIP_LOCK_WAIT="240"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert waiting.stderr.readline().startswith("waiting up to 240 s: data folder")
        hold.unlink()
        assert first.wait(timeout=120) == 0
        _, err = waiting.communicate(timeout=240)
        assert waiting.returncode == 0, err
    finally:
        hold.unlink(missing_ok=True)
        first.kill()
        if waiting is not None:
            waiting.kill()
    assert (ws / LOCK_NAME).read_text() == ""  # released
    assert (out / "05_slow.ipynb").is_file() and not (out / "05_slow.running.ipynb").exists()


@pytest.mark.slow
@needs_venv
def test_stage7_shards_run_at_once_under_the_folder_lock(tmp_path):
    ws = tmp_path / "data" / "demo"
    out, nbdir = ws / "executed", tmp_path / "nbs"
    hold = tmp_path / "hold"
    _sleeping_stage(nbdir, "07_shardy", tmp_path / "s0", hold)
    procs = [subprocess.Popen(_stage_cmd("07_shardy", nbdir, out), env=_env(AIP_RUN_TAG=f".shard-{i}-of-2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        _wait_for(tmp_path / "s0")
        blocked = subprocess.run(_stage_cmd("07_shardy", nbdir, out), env=_env(), capture_output=True, text=True,
                                 timeout=120)  # the whole stage 7 (or any stage) waits for the shards
    finally:
        hold.unlink(missing_ok=True)
    results = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert blocked.returncode == BUSY_STATUS and "(shard: stage 07_shardy.shard-" in blocked.stderr
    assert sorted(p.name for p in out.glob("*.ipynb")) == ["07_shardy.shard-0-of-2.ipynb",
                                                           "07_shardy.shard-1-of-2.ipynb"]


def _holder(root: Path, script: str, **env) -> subprocess.Popen:
    """``python -m aiplib.core.lock run root -- bash -c script`` as its own session (a real holder)."""
    return subprocess.Popen([sys.executable, "-m", "aiplib.core.lock", "run", str(root), "--command", "stage 07 test",
                             "--", "bash", "-c", script], env=_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _end(holder: subprocess.Popen, pids: Path) -> None:
    """After a failed assertion: kill the holder's session and the pids written to ``pids``."""
    if holder.poll() is None:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    for pid in pids.read_text().split() if pids.exists() else []:
        if _alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes in /proc")
def test_sigterm_stops_the_whole_run_and_keeps_the_record_until_its_last_process_ends(tmp_path):
    """The holder sends the signal to the command's process group, and waits for every process carrying the
    run's token, also one in a session of its own (as papermill's kernel) that outlives the signal."""
    pids = tmp_path / "pids"
    script = (f"sleep 60 & echo $! >> {pids}; "
              f"setsid bash -c 'trap \"\" TERM; sleep 3; echo late > {tmp_path / 'late'}' & echo $! >> {pids}; "
              f"echo $$ >> {pids}; wait")
    holder = _holder(tmp_path, script)
    try:
        t0 = time.monotonic()
        while not (pids.exists() and len(pids.read_text().split()) == 3):
            assert time.monotonic() - t0 < 60
            time.sleep(0.05)
        in_group, other_session, shell = map(int, pids.read_text().split())
        rec = json.loads((tmp_path / LOCK_NAME).read_text())
        assert rec["pid"] == holder.pid
        assert set(run_pids(rec["token"])) >= {in_group, other_session, shell}
        holder.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert not _alive(in_group) and not _alive(shell)  # the group got the signal
        assert _alive(other_session) and holder.poll() is None  # the lock waits for the last one
        assert json.loads((tmp_path / LOCK_NAME).read_text())["token"] == rec["token"]
        out, err = holder.communicate(timeout=30)
    finally:
        _end(holder, pids)
    assert holder.returncode == 128 + signal.SIGTERM, err
    assert (tmp_path / "late").read_text() == "late\n" and not _alive(other_session)
    assert (tmp_path / LOCK_NAME).read_text() == "" and run_pids(rec["token"]) == []
    fd, *_ = acquire(tmp_path, command="next")
    os.close(fd)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes in /proc")
def test_what_ignores_the_stop_signal_is_killed_after_the_grace_period(tmp_path):
    pids = tmp_path / "pids"
    holder = _holder(tmp_path, f"trap '' TERM; sleep 60 & echo $! > {pids}; wait", AIP_STOP_GRACE="1")
    try:
        t0 = time.monotonic()
        while not (pids.exists() and pids.read_text().strip()):
            assert time.monotonic() - t0 < 60
            time.sleep(0.05)
        sleeper = int(pids.read_text())
        holder.send_signal(signal.SIGTERM)
        _, err = holder.communicate(timeout=30)
    finally:
        _end(holder, pids)
    assert not _alive(sleeper)
    assert "make: stage 07 test did not end within 1 s of SIGTERM; killed what was left (pid " in err
    assert str(sleeper) in err.strip().splitlines()[-1]
    assert (tmp_path / LOCK_NAME).read_text() == ""


def test_a_run_waiting_for_a_folder_that_make_clean_deletes_locks_the_new_folder(tmp_path):
    """`make clean` removes the folder (its .aip-lock too) under the lock; a run that was waiting for that lock
    then takes the lock file at the path again, not the deleted one, so the next run sees it."""
    ws, hold = tmp_path / "data" / "demo", tmp_path / "hold"
    hold.write_text("")
    clean = _holder(ws, f"while [ -e '{hold}' ]; do sleep 0.1; done; rm -rf -- '{ws}'")
    t0 = time.monotonic()
    while not (ws / LOCK_NAME).is_file() or not (ws / LOCK_NAME).read_text():
        assert time.monotonic() - t0 < 60
        time.sleep(0.05)
    check = ("import os, json, pathlib, sys; rec = json.loads(pathlib.Path(sys.argv[1]).read_text()); "
             "sys.exit(0 if rec['token'] == os.environ['AIP_LOCK_TOKEN'] else 3)")
    waiter = subprocess.Popen([sys.executable, "-m", "aiplib.core.lock", "run", str(ws), "--wait", "120", "--command",
                               "stage 05", "--", sys.executable, "-c", check, str(ws / LOCK_NAME)],
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert waiter.stderr.readline().startswith("waiting up to 120 s: data folder")  # on the old lock file
        hold.unlink()
        assert clean.wait(timeout=60) == 0
        _, err = waiter.communicate(timeout=120)
    finally:
        hold.unlink(missing_ok=True)
        waiter.kill()
        _end(clean, tmp_path / "no pids")
    assert waiter.returncode == 0, err  # its record is in the lock file that exists
    assert (ws / LOCK_NAME).read_text() == ""  # and released
