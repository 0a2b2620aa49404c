"""The Makefile's recipes: paths with spaces, a stage whose kernel dies, and the parameters each
notebook receives.

These run `make` itself (GNU make, the project's .venv): a real stage of the custom profile with a
DATA_ROOT and input folders whose paths hold spaces, and a tiny notebook that kills its own kernel
(SIGKILL, as the out-of-memory killer does) run through `make run-stage` in a copy of the project
whose own path holds a space.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_custom import make_inputs

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"

needs_make = pytest.mark.skipif(
    shutil.which("make") is None or not (VENV / "bin" / "papermill").exists(),
    reason="needs GNU make and the project's .venv (make setup)")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIP_DATA_ROOT", "AIP_PROFILE", "MAKE"))}
    env["PYTHONPATH"] = str(REPO)  # the kernel imports this checkout's aiplib
    return env


def _tree_state(root: Path) -> tuple:
    """What a stray folder would change: the entries of the project root and of notebooks/, git status."""
    git = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                         capture_output=True, text=True, check=False).stdout
    return sorted(os.listdir(root)), sorted(os.listdir(root / "notebooks")), git


def test_dry_run_quotes_every_path():
    data_root = "/tmp/aip quoted/da ta"
    common = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed", f"DATA_ROOT={data_root}"]
    out = subprocess.run([*common, "05"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert f'AIP_DATA_ROOT="{data_root}"' in out
    assert f'bash scripts/run_stage.sh "05_build_manifests" "notebooks" "{data_root}/demo/executed"' in out
    out = subprocess.run([*common, "clean"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert f'rm -rf -- "{data_root}/demo"' in out


@pytest.mark.slow
def test_suite_reaches_the_notebooks_only_when_set():
    """SUITE=… becomes `-r suite "…"` (stages 05 and 07 declare it); without SUITE nothing is passed,
    so `make all` runs the background battery alone, as before the condition families."""
    common = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "DATA_ROOT=/tmp/aip-suite"]
    out = subprocess.run([*common, "07", "SUITE=background,channel"], cwd=REPO, capture_output=True, text=True,
                         env=_env(), check=True).stdout
    assert '"/tmp/aip-suite/demo/executed" -p profile demo -r suite "background,channel"' in out
    out = subprocess.run([*common, "07"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert "-r suite" not in out and '"/tmp/aip-suite/demo/executed" -p profile demo' in out


@pytest.mark.slow
@needs_make
def test_stage_runs_with_spaces_in_data_root_and_inputs(tmp_path):
    base = tmp_path / "a b"
    params = make_inputs(base / "my inputs")
    data_root = base / "the data"
    before = _tree_state(REPO)
    args = ["make", "--no-print-directory", "-o", ".venv/.installed", "01", "PROFILE=custom",
            f"DATA_ROOT={data_root}", f"SPEECH_DIR={params['speech_dir']}", f"TEXTS={params['texts']}",
            f"KWS_DIR={params['kws_dir']}", f"KWS_LABELS={params['kws_labels']}",
            f"BACKGROUNDS_DIR={params['backgrounds_dir']}"]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "0 fatal problem(s)" in proc.stdout  # the validate recipe ran on the quoted folders
    assert "=== stage 01_download_data (profile custom) ===" in proc.stdout
    executed = data_root / "custom" / "executed"
    assert (executed / "01_download_data.ipynb").is_file() and (executed / "01_download_data.log").is_file()
    assert not (executed / "01_download_data.running.ipynb").exists()
    inventory = (data_root / "custom" / "raw" / "inventory.csv").read_text()
    assert params["speech_dir"] + "/a.wav" in inventory  # the space-holding input path, unsplit
    assert _tree_state(REPO) == before, "the run left a stray file or folder in the working tree"
    assert sorted(os.listdir(base)) == ["my inputs", "the data"]


def _killing_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("die: bool = True")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params,
                nbformat.v4.new_code_cell("import os, signal\nif die:\n    os.kill(os.getpid(), signal.SIGKILL)"),
                nbformat.v4.new_code_cell("result = 42\nprint('finished')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.mark.slow
@needs_make
def test_killed_kernel_ends_with_one_line_in_a_clone_with_a_space(tmp_path):
    clone = tmp_path / "my clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", clone / "Makefile")
    shutil.copy(REPO / "scripts" / "run_stage.sh", clone / "scripts" / "run_stage.sh")
    (clone / ".venv").symlink_to(VENV.resolve())
    _killing_notebook(clone / "nbs" / "99_kill_kernel.ipynb")
    args = ["make", "--no-print-directory", "run-stage", "STAGE=99_kill_kernel", "NOTEBOOKS=nbs"]
    proc = subprocess.run(args, cwd=clone, capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode != 0
    executed = clone / "data" / "demo" / "executed"  # DATA_ROOT defaults to "$(CURDIR)/data", with its space
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("make: *** [Makefile") and "run-stage] Error 1" in lines[-1]  # make's own line
    assert lines[-3:-1] == [  # the reason is the stage's last line
        f"executed copy: {executed}/99_kill_kernel.failed.ipynb; full log: {executed}/99_kill_kernel.log",
        "make: stage 99_kill_kernel FAILED: the kernel died (killed by the system, most often for lack of "
        "memory, or by kill -9); finished work is kept, so re-running `make 99` with the same variables "
        "resumes where it stopped"]
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr  # no nbclient trace on screen
    assert "DeadKernelError" in (executed / "99_kill_kernel.log").read_text()  # the trace is in the log
    assert (executed / "99_kill_kernel.failed.ipynb").is_file() and not (executed / "99_kill_kernel.ipynb").exists()
    assert sorted(os.listdir(clone)) == [".venv", "Makefile", "data", "nbs", "scripts"]  # no stray folder

    # the re-run the message suggests (here without the kill) completes and keeps the record
    proc = subprocess.run([*args, "PARAMS=-p die False"], cwd=clone, capture_output=True, text=True, env=_env(),
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = nbformat.read(str(executed / "99_kill_kernel.ipynb"), as_version=4)
    assert "finished" in done.cells[-1].outputs[0]["text"]
    assert not (executed / "99_kill_kernel.failed.ipynb").exists()  # the failure's copy went with the success
    assert sorted(os.listdir(clone)) == [".venv", "Makefile", "data", "nbs", "scripts"]


def _run_tiny_stage(tmp_path, stage: str, cells: list[str], nbdir: str = "nbs", out: str = "out"):
    """Run a one-off notebook of ``cells`` as stage ``stage`` through scripts/run_stage.sh (real papermill)."""
    d = tmp_path / nbdir
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    d.mkdir()
    nbformat.write(nb, str(d / f"{stage}.ipynb"))
    env = dict(_env(), PAPERMILL=str(VENV / "bin" / "papermill"), FILTER_PYTHON=str(VENV / "bin" / "python"))
    return subprocess.run(["bash", str(REPO / "scripts" / "run_stage.sh"), stage, str(d), str(tmp_path / out)],
                          cwd=tmp_path, capture_output=True, text=True, env=env, check=False)


@pytest.mark.slow
@needs_make
def test_cell_error_still_names_the_cell_and_its_message(tmp_path):
    proc = _run_tiny_stage(tmp_path, "98_raise", ["x = 1", "raise ValueError('bad input x')"],
                           nbdir="nb dir", out="out dir")
    nbdir, out = tmp_path / "nb dir", tmp_path / "out dir"
    assert proc.returncode == 1
    err = proc.stderr
    assert f"make: stage 98_raise FAILED — notebook {nbdir}/98_raise.ipynb" in err
    assert 'Exception encountered at "In [2]":' in err and "ValueError: bad input x" in err
    assert "papermill/execute.py" not in err  # papermill's own frames are only in the log
    assert "papermill/execute.py" in (out / "98_raise.log").read_text()
    assert (out / "98_raise.failed.ipynb").is_file()
    assert err.splitlines()[-1] == (
        "make: stage 98_raise FAILED: ValueError: bad input x — finished work is kept, so once the cause is "
        "fixed re-running `make 98` with the same variables resumes where it stopped")


@pytest.mark.slow
@needs_make
def test_full_disk_ends_with_no_space_left_on_device(tmp_path):
    """A write that fails with ENOSPC inside a cell, with the stage's log on a full device too
    (/dev/full: every write raises ENOSPC), as on a data folder out of space: the reason is read from
    papermill's stream as it passes, so the last line names it although the log holds nothing."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "96_full.log").symlink_to("/dev/full")
    proc = _run_tiny_stage(tmp_path, "96_full", [
        "done = 1  # finished work",
        "with open('/dev/full', 'w') as f:\n    f.write('x' * 10)\n    f.flush()"])
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last == ("make: stage 96_full FAILED: OSError: [Errno 28] No space left on device — finished work is "
                    f"kept; free space on the disk of {tmp_path}, then re-running `make 96` with the "
                    "same variables resumes where it stopped")
    assert f"warning: the log {out}/96_full.log could not be written in full" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@needs_make
def test_permission_denied_is_named_in_the_last_line(tmp_path):
    proc = _run_tiny_stage(tmp_path, "95_perm", [
        "import errno\nraise PermissionError(errno.EACCES, 'Permission denied', '/data/demo/bg/x.wav')"])
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith(
        "make: stage 95_perm FAILED: PermissionError: [Errno 13] Permission denied: '/data/demo/bg/x.wav' — "
        "finished work is kept; give write permission to the data folder")


def test_run_stage_passes_a_notebook_only_the_parameters_it_declares(tmp_path):
    """scripts/run_stage.sh filters make's one set of papermill arguments per notebook (real
    notebook 05); a stand-in papermill records the arguments it receives, one per line."""
    fake = tmp_path / "bin dir" / "papermill"
    fake.parent.mkdir()
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$RECORD"\necho "{}" > "$4"\n')
    fake.chmod(0o755)
    record, out = tmp_path / "args.txt", tmp_path / "out dir"
    env = dict(_env(), PAPERMILL=str(fake), FILTER_PYTHON=sys.executable, RECORD=str(record))
    args = ["-p", "profile", "custom", "-p", "model", "whisper_tiny_en", "-r", "texts", "/my inputs/t.csv",
            "-y", "snrs: [10, 5]", "-p", "overwrite", "false"]

    def run_stage(*more):
        return subprocess.run(["bash", str(REPO / "scripts" / "run_stage.sh"), "05_build_manifests",
                               str(REPO / "notebooks"), str(out), *args, *more],
                              cwd=tmp_path, capture_output=True, text=True, env=env, check=False)

    # a name no notebook declares (a typo) stops the stage before papermill starts
    proc = run_stage("-p", "snrs_db", "10")
    assert proc.returncode == 1 and not record.exists()
    assert proc.stderr.splitlines() == [
        f"make: PARAMS: no notebook in {REPO / 'notebooks'} declares snrs_db (did you mean snrs?) (a parameter "
        "reaches only the notebooks whose parameters cell declares it)",
        "make: stage 05_build_manifests FAILED before papermill started"]
    proc = run_stage()
    assert proc.returncode == 0, proc.stderr
    received = record.read_text().splitlines()
    assert received[:4] == ["--cwd", str(REPO / "notebooks"), str(REPO / "notebooks" / "05_build_manifests.ipynb"),
                            str(out / "05_build_manifests.running.ipynb")]
    assert received[4:] == ["-p", "profile", "custom", "-y", "snrs: [10, 5]", "-p", "overwrite", "false",
                            "--log-level", "WARNING", "--no-progress-bar", "--stderr-file", "/dev/stderr"]
    # model (stage 06/07) and texts (stage 01) leave silently
    assert proc.stderr == ""
    assert (out / "05_build_manifests.ipynb").is_file() and sorted(os.listdir(out)) == [
        "05_build_manifests.ipynb", "05_build_manifests.log"]


def test_run_stage_keeps_two_benign_kernel_lines_in_the_log_only(tmp_path):
    """The kernel's TCP-encryption warning and the KeyboardInterrupt that jupyter_client's shutdown
    interrupt makes the kernel log are left off the screen (matched from the start of a line only) and
    kept in the stage's log; every other line, an unfinished progress line and a traceback's
    hiding behave as before. A stand-in papermill writes the lines to its stderr."""
    tcp = ("[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication (including "
           "code and outputs) is sent in plain text and is susceptible to eavesdropping. Use IPC transport or launch "
           "with kernel manager-provisioned CurveZMQ keys to enable transport encryption.")
    kbi = "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel."
    other = "[IPKernelApp] WARNING | Unknown message type: 'foo'"
    fake = tmp_path / "bin" / "papermill"
    fake.parent.mkdir()
    fake.write_text("#!/usr/bin/env bash\n"
                    f"printf '%s\\n' \"{tcp}\" >&2\n"
                    "printf '[progress] stage · 1/2 item\\n' >&2\n"
                    f"printf '%s\\n' \"{other}\" >&2\n"
                    "printf '[progress] stage · 2/2 item · done' >&2\n"  # no newline at the end
                    f"printf '\\n%s\\n' \"{kbi}\" >&2\n"
                    "printf 'note: the kernel said %s\\n' 'KeyboardInterrupt caught in kernel' >&2\n"
                    "echo '{}' > \"$4\"\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    env = dict(_env(), PAPERMILL=str(fake), FILTER_PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "run_stage.sh"), "05_build_manifests",
                           str(REPO / "notebooks"), str(out)], cwd=tmp_path, capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "[progress] stage · 1/2 item", other, "[progress] stage · 2/2 item · done",
        "note: the kernel said KeyboardInterrupt caught in kernel"]  # not at a line start: shown
    log = (out / "05_build_manifests.log").read_text().splitlines()
    assert log[0] == tcp and kbi in log and other in log


@pytest.mark.slow
@needs_make
def test_real_stage_hides_the_tcp_warning_from_the_screen_only(tmp_path):
    """A real papermill run (ipykernel >= 7.3 logs the warning at kernel start): not on screen, in the log."""
    proc = _run_tiny_stage(tmp_path, "97_ok", ["import sys\nprint('to stderr', file=sys.stderr)"])
    out = tmp_path / "out"
    assert proc.returncode == 0, proc.stderr
    assert "to stderr" in proc.stderr and "IPKernelApp" not in proc.stderr
    import ipykernel

    if tuple(int(x) for x in ipykernel.__version__.split(".")[:2]) >= (7, 3):
        assert "Kernel is running over TCP without encryption." in (out / "97_ok.log").read_text()


def test_seed_reaches_stages_2_3_6_9_and_seed_offset_stage_5_only():
    """What the README says of SEED= and PARAMS='-p seed_offset n', read from the notebooks' own
    parameters cells (the declarations scripts/run_stage.sh filters make's arguments by)."""
    from aiplib.core.papermill_args import notebook_parameters

    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    declares = {nb.name[:2]: set(notebook_parameters(nb)) for nb in notebooks}
    assert sorted(k for k, names in declares.items() if "seed" in names) == ["02", "03", "06", "09"]
    assert sorted(k for k, names in declares.items() if "seed_offset" in names) == ["05"]
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "DATA_ROOT=/tmp/aip-seed",
                          "05", "SEED=7"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert "-p seed 7" in out  # make passes it to every stage; run_stage.sh drops it where not declared


def test_relative_paths_are_taken_from_where_make_runs():
    """The kernels run in notebooks/, so a relative DATA_ROOT or input folder reaches them made
    absolute from make's folder (as `make validate` / `make stamps` read it); absolute and ~ paths
    are kept, a space inside a relative path too."""
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "run-stage",
                          "STAGE=01_download_data", "PROFILE=custom", "DATA_ROOT=rel/out", "SPEECH_DIR=my sp/eech",
                          "TEXTS=/abs/texts.csv", "KWS_DIR=~/kws"],
                         cwd=REPO, env=_env(), capture_output=True, text=True, check=True).stdout
    assert f'AIP_DATA_ROOT="{REPO}/rel/out"' in out
    assert f'speech_dir "{REPO}/my sp/eech"' in out
    assert 'texts "/abs/texts.csv"' in out and 'kws_dir "~/kws"' in out


@pytest.mark.slow
def test_make_all_and_merge_hold_the_data_folder_lock():
    """`make all` runs its stages inside one exclusive lock of DATA_ROOT/PROFILE (each stage, run by
    scripts/run_stage.sh, takes it too, or runs at once inside make all); `make merge` as well."""
    common = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "DATA_ROOT=/tmp/aip lock"]
    out = subprocess.run([*common, "all"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert ('.venv/bin/python -m aiplib.core.lock run "/tmp/aip lock/demo" --command "make all PROFILE=demo" -- bash -c '
            "'for s in 01_download_data") in out
    out = subprocess.run([*common, "merge"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert '-m aiplib.core.lock run "/tmp/aip lock/demo" --command "make merge PROFILE=demo" --' in out


def test_make_criteria_without_its_file_names_the_module_of_the_format(tmp_path):
    """`make criteria` with a missing CRITERIA file stops with one line pointing at the module that
    documents the criteria format (aiplib/analysis/criteria.py, EXAMPLE_CRITERIA)."""
    missing = tmp_path / "none.json"
    res = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "criteria",
                          f"CRITERIA={missing}", f"DATA_ROOT={tmp_path}"], cwd=REPO, capture_output=True,
                         text=True, env=_env(), check=False)
    assert res.returncode != 0
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("make criteria:"))
    assert f"{missing} not found" in line and "format in aiplib/analysis/criteria.py" in line
    assert "EXAMPLE_CRITERIA" in (REPO / "aiplib" / "analysis" / "criteria.py").read_text()


def test_make_test_prints_the_reason_of_every_skip():
    """Both pytest calls of `make test` (unit tests, then nbval) carry ``-rs``."""
    recipe = (REPO / "Makefile").read_text().split("\ntest: setup\n", 1)[1].split("\n\n", 1)[0]
    calls = [line for line in recipe.splitlines() if "/bin/pytest" in line]
    assert len(calls) == 2 and all(" -rs " in c for c in calls), calls


@pytest.mark.slow
def test_a_missing_fieldkit_fails_under_ci(tmp_path):
    """With CI set, a test that needs ../shared/fieldkit fails instead of skipping (the ``fieldkit``
    fixture and a ``skipif`` naming the field kit alike); without CI both skip, with their reason."""
    tests = tmp_path / "proj" / "tests"  # ../shared/fieldkit of this copy does not exist
    tests.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "test_fk.py").write_text(
        "import pytest\n\n"
        "def test_fixture(fieldkit):\n    pass\n\n"
        "@pytest.mark.skipif(True, reason='fieldkit absent')\ndef test_marker():\n    pass\n\n"
        "@pytest.mark.skipif(True, reason='no GPU')\ndef test_other_skip():\n    pass\n")
    assert not (tmp_path / "shared" / "fieldkit").exists()
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tests)]
    local = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert "3 skipped" in local.stdout and "../shared/fieldkit is not present" in local.stdout, local.stdout
    ci = subprocess.run(args, env=env | {"CI": "true"}, capture_output=True, text=True, cwd=tmp_path)
    assert ci.returncode == 1 and "1 skipped, 2 errors" in ci.stdout, ci.stdout
    assert "may not skip under CI" in ci.stdout and "no GPU" in ci.stdout


def _make_targets() -> set[str]:
    """Every target of the Makefile with a recipe or prerequisites (make's own database, the generated
    per-stage targets included), files and special targets left out."""
    db = subprocess.run(["make", "-pRrq", "-f", "Makefile", "-o", ".venv/.installed", ":"], cwd=REPO,
                        capture_output=True, text=True, env=_env(), check=False).stdout
    db = db[db.index("# Files"):]
    names = set()
    for block in db.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith("#")]
        if not lines or ":" not in lines[0] or lines[0].startswith(("\t", ".", "/")):
            continue
        name, deps = lines[0].split(":", 1)
        if name and "/" not in name and "%" not in name and " " not in name and (deps.strip() or any(
                ln.startswith("\t") for ln in lines[1:])):
            names.add(name)
    return names


def test_help_lists_every_target_one_line_each():
    out = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "help"], cwd=REPO,
                         capture_output=True, text=True, env=_env(), check=True).stdout
    lines = out.splitlines()
    first_words = {ln.split()[0] for ln in lines if ln.startswith("  ") and ln.split()}
    stage_line = next(ln for ln in lines if ln.startswith("  01 … 10"))
    assert "stage-01" in stage_line and "stage-01_download_data" in stage_line
    targets = _make_targets()
    assert {"all", "help", "report", "test", "clean", "01", "stage-09", "stage-10_listen_and_explore"} <= targets
    one_digit = {t for t in targets if len(t) == 1 and t.isdigit()}  # `make 7`: one line naming make 07
    assert one_digit == set("123456789")
    stages = {t for t in targets - one_digit if t.removeprefix("stage-")[:2].isdigit()}
    assert len(stages) == 30                                   # 01 … 10, stage-NN, stage-NN_name
    missing = sorted(targets - stages - one_digit - first_words)
    assert not missing, f"make help does not list {missing}"
    assert len(first_words) == len([ln for ln in lines if ln.startswith("  ")])   # one line per target
    assert any(ln.startswith("Variables: PROFILE=") for ln in lines)


@pytest.mark.slow
def test_all_ends_with_the_report_path_and_report_takes_the_newer_notebook():
    common = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "DATA_ROOT=/tmp/aip end"]
    out = subprocess.run([*common, "all"], cwd=REPO, capture_output=True, text=True, env=_env(),
                         check=True).stdout.strip().splitlines()
    assert out[-1] == 'echo "make all: done — report: /tmp/aip end/demo/results/report.html"'
    out = subprocess.run([*common, "report"], cwd=REPO, capture_output=True, text=True, env=_env(), check=True).stdout
    assert ('--render "/tmp/aip end/demo/executed/09_make_figures.ipynb" "notebooks/09_make_figures.ipynb"'
            in out.replace("\\\n", "").replace("\t", "").replace("  ", " "))


@pytest.mark.slow
@needs_make
def test_make_all_with_a_mistyped_model_fails_before_stage_1(tmp_path):
    """`make all MODEL=typo` stops in seconds, before stage 1, with stage 7's message naming the
    valid models (aiplib/inference/preflight.py; it used to come after stages 1-6)."""
    import resource
    import time

    t0 = time.monotonic()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "all", "MODEL=typo",
                           f"DATA_ROOT={tmp_path}"], cwd=REPO, capture_output=True, text=True, env=_env())
    seconds = time.monotonic() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    assert proc.returncode != 0
    assert "make: MODEL=typo: KeyError: unknown model 'typo'; valid models: whisper_tiny_en" in proc.stderr
    assert "=== stage" not in proc.stdout + proc.stderr and not (tmp_path / "demo").exists()
    # < 10 s on an idle machine; a machine shared by others stretches the wall time by its load
    busy = max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    assert cpu < 10 and seconds < 10 * busy, f"{seconds:.1f} s wall, {cpu:.1f} s CPU, load x{busy:.1f}"


def _executed(out: str) -> list[str]:
    """The stages a make run executed (papermill's "=== stage NN_name (profile …) ===" lines)."""
    return [ln.split()[2] for ln in out.splitlines() if ln.startswith("=== stage ") and "(profile" in ln]


@needs_make
@pytest.mark.slow
def test_second_make_all_runs_no_notebook_and_an_edit_reruns_what_it_touches(smoke_demo_root, tmp_path):
    """Stage records (aiplib/core/stage_records.py) at smoke size: after `make all`, a second one
    runs no notebook in <= 60 s (one "up to date … skipped" line per stage); an edited curated
    background re-runs stage 3 only (it curates the same file again, so stages 4-10 see identical
    inputs); FORCE=1 runs the stage anyway."""
    import time

    root = tmp_path / "data"
    shutil.copytree(smoke_demo_root, root, symlinks=True)
    # The shared smoke run holds every stage's record (paths relative to the data folder, so the
    # copy is up to date); without the records of stages 7-10 exactly those run again.
    for record in (root / "demo" / "executed").glob("*.stamp.json"):
        if record.name[:2] in ("07", "08", "09", "10"):
            record.unlink()
    env = {**_env(), "AIP_SMOKE": "1"}
    make = ["make", "--no-print-directory", "-o", ".venv/.installed", f"DATA_ROOT={root}"]

    def run(*args):
        t0 = time.monotonic()
        p = subprocess.run([*make, *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=3000)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        return p.stdout + p.stderr, time.monotonic() - t0

    out, _ = run("all")
    assert _executed(out) == ["07_run_inference", "08_score_outputs", "09_make_figures", "10_listen_and_explore"]
    out, seconds = run("all")
    assert _executed(out) == [], out[-3000:]
    assert out.count("up to date (inputs, parameters and code unchanged) — skipped") == 10
    assert seconds <= 60, f"no-op make all took {seconds:.1f} s"
    bg = sorted((root / "demo" / "bg").glob("*.wav"))[0]
    original = bg.read_bytes()
    bg.write_bytes(original[:-4] + b"\x00\x01\x00\x01")
    out, _ = run("all")
    assert _executed(out) == ["03_curate_backgrounds"], out[-3000:]
    assert bg.read_bytes() == original
    out, _ = run("04", "FORCE=1")
    assert _executed(out) == ["04_extract_descriptors"]


@needs_make
@pytest.mark.slow
def test_make_02_after_an_edited_recording_revalidates_it_and_make_stamps_sees_the_folders(tmp_path):
    """Issue #37: after an input recording is edited, `make 02` re-runs stage 1 (its record is stale:
    the recording's SHA-256 changed) and then stage 2, whose item-bank audio is the new recording;
    `make stamps` with the custom folder variables reports exactly that, and nothing when up to date."""
    import hashlib

    import soundfile as sf
    from test_custom import voice_like, write

    params = make_inputs(tmp_path / "inputs")
    data_root = tmp_path / "data"
    make = ["make", "--no-print-directory", "-o", ".venv/.installed", "PROFILE=custom", f"DATA_ROOT={data_root}",
            f"SPEECH_DIR={params['speech_dir']}", f"TEXTS={params['texts']}", f"KWS_DIR={params['kws_dir']}",
            f"KWS_LABELS={params['kws_labels']}", f"BACKGROUNDS_DIR={params['backgrounds_dir']}"]
    env = {**_env(), "AIP_SMOKE": "1"}

    def run(*args, check=True):
        p = subprocess.run([*make, *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=1800)
        assert p.returncode == 0 or not check, (p.stdout + p.stderr)[-3000:]
        return p.stdout + p.stderr

    assert _executed(run("01", "02")) == ["01_download_data", "02_build_item_banks"]
    out = run("stamps")
    assert "01_download_data: up to date" in out and "02_build_item_banks: up to date" in out
    out = run("02")
    assert _executed(out) == [], out[-2000:]  # nothing changed: skipped
    bank = data_root / "custom" / "itembanks" / "asr.jsonl"
    rows = [json.loads(line) for line in bank.read_text().splitlines()]
    audio = data_root / "custom" / [r["path"] for r in rows if "a.wav" in r.get("source_file", "")][0]
    before = hashlib.sha256(audio.read_bytes()).hexdigest()
    recording = Path(params["speech_dir"]) / "a.wav"
    write(recording, voice_like(1.5, f0=240, seed=5))
    out = run("stamps")
    assert f"01_download_data: RUNS — input changed: {recording}" in out
    out = run("02")
    assert _executed(out) == ["01_download_data", "02_build_item_banks"], out[-2000:]
    after = hashlib.sha256(audio.read_bytes()).hexdigest()
    assert after != before
    y, sr = sf.read(str(audio))
    assert sr > 0 and len(y) > 0
