"""Shared fixtures: small workspaces made by the tests, and the read-only field kit."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aiplib.core.workspace import workspace
from aiplib.io.audio import write_wav

FIELDKIT = Path(__file__).resolve().parents[1].parent / "shared" / "fieldkit"


def under_ci() -> bool:
    """Whether the environment says CI (``CI`` set to anything but empty, 0, false or no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def fieldkit() -> Path:
    """``../shared/fieldkit`` (real recordings, read-only); skips if absent, fails under CI."""
    if not FIELDKIT.is_dir():
        if under_ci():
            pytest.fail(f"{FIELDKIT} is not present: under CI the real-recording tests may not skip")
        pytest.skip("../shared/fieldkit is not present")
    return FIELDKIT


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a test skipped for a missing field kit (a ``skipif`` whose reason names "fieldkit")
    fails (reported as an error when the skip happens at setup, as ``skipif`` does)."""
    outcome = yield
    report = outcome.get_result()
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if report.skipped and under_ci() and "fieldkit" in reason.lower():
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: may not skip under CI ({reason}); the real-recording tests need {FIELDKIT}"


def make_tiny_workspace(root, *, n_asr=2, n_kws=2, n_bg=20, bg_seconds=3.0, seed=0):
    """A workspace with synthetic item banks (tones with a speech-like envelope) and a battery.

    Returns the Workspace. Items are 1–2 s; backgrounds are noise of ``bg_seconds``.
    """
    ws = workspace("demo", data_root=root)
    rng = np.random.default_rng(seed)
    sr = 16000
    asr = []
    for i in range(n_asr):
        n = int(sr * (1.0 + 0.5 * i))
        t = np.arange(n) / sr
        y = 0.2 * np.sin(2 * np.pi * (200 + 50 * i) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
        p = write_wav(ws.itembanks / "audio" / "asr" / f"a{i:02d}.wav", y.astype(np.float32))
        asr.append(dict(item_id=f"a{i:02d}", path=ws.rel(p), text=f"word {i}", accent_group="g1" if i % 2 else "g2",
                        duration_s=n / sr, synthetic=True, source="test", licence="CC0", attribution="test",
                        speaker="s", source_file="none"))
    kws = []
    for i in range(n_kws):
        n = sr
        y = 0.1 * rng.standard_normal(n) * np.hanning(n)
        p = write_wav(ws.itembanks / "audio" / "kws" / f"k{i:02d}.wav", y.astype(np.float32))
        kws.append(dict(item_id=f"k{i:02d}", path=ws.rel(p), label="yes" if i % 2 == 0 else "cat",
                        is_target=i % 2 == 0, accent_group=None, duration_s=1.0, synthetic=True, source="test",
                        licence="CC0", attribution="test", speaker="s", source_file="none"))
    for fam, rows in (("asr", asr), ("kws", kws)):
        with open(ws.itembanks / f"{fam}.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    bat = []
    for j in range(n_bg):
        y = (0.05 * rng.standard_normal(int(sr * bg_seconds))).astype(np.float32)
        p = write_wav(ws.bg / f"bg{j:02d}.wav", y)
        bat.append(dict(bg_id=f"bg{j:02d}", category="stationary", description="noise", source_package="test",
                        source_file="none", licence="CC0", attribution="test", synthetic=True,
                        source_duration_s=bg_seconds, looped=False, gain_db=0.0, lufs_before=-30.0,
                        lufs_after=-30.0, path=ws.rel(p)))
    pd.DataFrame(bat).to_csv(ws.descriptors / "battery.csv", index=False)
    return ws


@pytest.fixture
def tiny_ws(tmp_path):
    return make_tiny_workspace(tmp_path)


# ----- one smoke-size `make all` per pytest run, shared by the docs blocks and the pipeline tests -----

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
#: The script of the README's first runnable block: the whole demo at smoke size, from an empty data root.
SMOKE_ALL_SCRIPT = "make all\n"
#: Seconds one shell block (or the shared `make all`) may take.
BLOCK_TIMEOUT_S = 1800
#: The fake recogniser of the README's "audit your own model": prints one word for every WAV.
FAKE_ASR = '#!/bin/sh\ntest -f "$1" || { echo "my-asr: no file $1" >&2; exit 2; }\necho yes\n'


@dataclass
class BlockRun:
    """One shell script run as a docs block runs: its data root, exit status, output and seconds."""
    script: str
    data_root: Path
    returncode: int
    output: str
    seconds: float


def block_env(tmp: Path, data_root: Path) -> dict:
    """The environment the docs blocks run in: smoke size (``AIP_SMOKE=1``), ``DATA_ROOT=data_root``,
    a fake ``my-asr`` and a ``make`` that does not redo `make setup` (``-o .venv/.installed``; `make test`
    depends on it) first on ``PATH`` (written into ``tmp/bin``). Skips without GNU make or the .venv."""
    real_make = shutil.which("make")
    if real_make is None or not (VENV / "bin" / "papermill").exists():
        pytest.skip("needs GNU make and the project's .venv (make setup)")
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "my-asr").write_text(FAKE_ASR)
    # -o: a checkout newer than .venv/.installed must not make the blocks reinstall the environment.
    (bin_dir / "make").write_text(f'#!/bin/sh\nexec "{real_make}" -o .venv/.installed "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIP_", "MAKE", "MFLAGS")) and k not in ("DATA_ROOT", "MODELS", "PROFILE")}
    env.update(AIP_SMOKE="1", DATA_ROOT=str(data_root), AIP_DATA_ROOT=str(data_root), PYTHONPATH=str(REPO),
               PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return env


@contextmanager
def repo_root_kept():
    """On exit, files that a block wrote at the project root (a models file, a criteria file) are
    removed, and changed ones restored."""
    before = {p.name: (p.read_bytes() if p.is_file() else None) for p in REPO.iterdir()}
    try:
        yield
    finally:
        for p in REPO.iterdir():
            if p.name not in before:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            elif before[p.name] is not None and p.is_file() and p.read_bytes() != before[p.name]:
                p.write_bytes(before[p.name])


def run_block(script: str, env: dict) -> BlockRun:
    """Run ``script`` with ``bash -euo pipefail`` at the project root in ``env`` (as a docs block)."""
    t0 = time.perf_counter()
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=BLOCK_TIMEOUT_S)
    return BlockRun(script, Path(env["DATA_ROOT"]), run.returncode, run.stdout + run.stderr,
                    round(time.perf_counter() - t0, 1))


@pytest.fixture(scope="session")
def smoke_make_all(tmp_path_factory) -> BlockRun:
    """``make all`` (:data:`SMOKE_ALL_SCRIPT`, the README's first runnable block) at smoke size in an
    empty data root, in the docs blocks' environment, once per pytest run (a few minutes on 2 cores).
    The README's block is checked against this run; the docs blocks after it start from a copy of its
    data root; :func:`smoke_demo_root` is its data root. Nobody writes into it: tests copy it."""
    tmp = tmp_path_factory.mktemp("smoke-all")
    env = block_env(tmp, tmp / "data")
    with repo_root_kept():
        done = run_block(SMOKE_ALL_SCRIPT, env)
    print(f"\n[smoke make all] exit {done.returncode} in {done.seconds} s ({done.data_root})")
    return done


@pytest.fixture(scope="session")
def smoke_demo_root(request) -> Path:
    """A data root whose ``demo/`` holds a finished demo run at smoke size (``make all`` with
    ``AIP_SMOKE=1``: stages 1–10, :func:`smoke_make_all`, once per session). Tests copy it (most leave
    out ``inference`` and ``results`` to keep stages 1–6), never write into it.
    ``$AIP_TEST_SMOKE_ROOT`` names such a data root made before (then nothing is built)."""
    given = os.environ.get("AIP_TEST_SMOKE_ROOT")
    if given:
        return Path(given)
    shared = request.getfixturevalue("smoke_make_all")
    assert shared.returncode == 0, f"make all (smoke) exited {shared.returncode}:\n{shared.output[-3000:]}"
    return shared.data_root
