"""Numbers that travel: CTranslate2's pinned numeric path, and the demo fingerprint's slice decoded
again on this machine (``benchmarks/demo_fingerprint.json``).

The slice is decoded in two processes that differ in everything a machine can differ in for the
embedded Whisper: one started with ``CT2_USE_MKL=1`` (what CTranslate2 does on an Intel CPU), two
CTranslate2 threads and stage 7's batches of 8; one with ``CT2_USE_MKL=0``, one thread and one
stimulus per call; the two are started together. Both must give the fingerprint's transcripts, row
for row.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aiplib.inference.models.ct2_numerics import OPT_OUT_VARIABLE, PINNED_ENVIRONMENT, cpu_flags

REPO = Path(__file__).resolve().parents[1]
FINGERPRINT = REPO / "benchmarks" / "demo_fingerprint.json"
DEMO_STAGES = ("01", "02", "03", "04", "05")

#: The pinned path exists on x86-64 CPUs with AVX2 only (elsewhere the pin records "native").
pinned_path_only = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or "avx2" not in cpu_flags(),
    reason="the pinned numeric path needs an x86-64 CPU with AVX2")

_REPORT = """
import json
from aiplib.inference.models import get_entry
from aiplib.inference.models.ct2_numerics import numerics_record
from aiplib.inference.models.whisper_weights import resolve_weights
path, _ = resolve_weights(get_entry("whisper_tiny_en"))
print(json.dumps(numerics_record(path, "int8")))
"""


def _clean_env(**extra) -> dict:
    """This process's environment without the pin's variables and the smoke switch, plus ``extra``."""
    dropped = (OPT_OUT_VARIABLE, "AIP_SMOKE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PROFILE")
    env = {k: v for k, v in os.environ.items() if k not in PINNED_ENVIRONMENT and k not in dropped}
    env.update(extra)
    return env


def _numerics_in_child(**env) -> dict:
    done = subprocess.run([sys.executable, "-c", _REPORT], env=_clean_env(**env), capture_output=True,
                          text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pinned_path_only
def test_pin_overrides_ct2_use_mkl():
    """A process started with CT2_USE_MKL=1 still runs oneDNN with AVX2 once aiplib pins it."""
    record = _numerics_in_child(CT2_USE_MKL="1", CT2_FORCE_CPU_ISA="GENERIC")
    assert record["pinned"] is True
    assert record["variables"]["CT2_USE_MKL"] == "0"
    assert record["ctranslate2"]["isa"] == "AVX2"
    assert record["ctranslate2"]["use_mkl"] == "false"
    assert record["ctranslate2"]["gemm_s8_backend"].startswith("DNNL")


@pytest.mark.slow
@pinned_path_only
def test_opt_out_keeps_ctranslate2s_choice():
    """AIP_CT2_NATIVE=1 keeps what the environment says (here MKL forced on) and records it."""
    record = _numerics_in_child(CT2_USE_MKL="1", **{OPT_OUT_VARIABLE: "1"})
    assert record["pinned"] is False
    assert record["reason"].startswith("native")
    assert record["variables"][OPT_OUT_VARIABLE] == "1"
    assert record["ctranslate2"]["use_mkl"] == "true"
    assert record["ctranslate2"]["gemm_s8_backend"].startswith("MKL")


# ------------------------------------------------------------------ the fingerprint slice, decoded again
_DECODE = """
import sys
from aiplib.core.workspace import workspace
from aiplib.inference.fingerprint_slice import decode_slice, select_slice
from aiplib.io.formats.tables import read_manifest
root, out, batch_size, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ws = workspace("demo", data_root=root, create=False)
manifests = {family: read_manifest(ws, family) for family in ("asr", "kws")}
rows = select_slice(manifests)
table = decode_slice(ws, rows, batch_size=batch_size, cpu_threads=threads, workers=1)
table.to_csv(out, index=False)
"""


@pytest.fixture(scope="module")
def fingerprint() -> dict:
    if not FINGERPRINT.is_file():
        pytest.fail(f"{FINGERPRINT} is missing: `make all`, then `make fingerprint`, and commit it")
    return json.loads(FINGERPRINT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def demo_inputs(tmp_path_factory) -> Path:
    """The demo's stages 1-5 at full size (not smoke) in a scratch data root, through make."""
    root = tmp_path_factory.mktemp("demo-inputs")
    env = _clean_env(AIP_DATA_ROOT=str(root))
    for stage in DEMO_STAGES:
        done = subprocess.run(["make", "-o", ".venv/.installed", "--no-print-directory", stage,
                               "PROFILE=demo", f"DATA_ROOT={root}"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=1800, check=False)
        assert done.returncode == 0, f"make {stage}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return root


def _expected_rows(fingerprint: dict) -> pd.DataFrame:
    rows = pd.DataFrame(fingerprint["slice"]["rows"])
    return rows[["id", "task", "response"]].sort_values(["task", "id"]).reset_index(drop=True)


@pytest.mark.slow
@pinned_path_only
def test_demo_inputs_match_the_fingerprint(fingerprint, demo_inputs):
    """Stages 1-5 on this machine give the item banks, backgrounds, descriptors and manifests whose
    SHA-256 the fingerprint holds (a difference names the file and its Debian package)."""
    from aiplib.analysis.fingerprint import compare_inputs  # noqa: PLC0415 - the analysis layer
    from aiplib.core.workspace import workspace  # noqa: PLC0415

    ws = workspace("demo", data_root=demo_inputs, create=False)
    divergences = compare_inputs(fingerprint, ws)
    assert divergences == [], "\n".join(str(d) for d in divergences[:5])


#: The two processes the slice is decoded in: CT2_USE_MKL, stimuli per call, CTranslate2 threads.
SLICE_RUNS = {"mkl1-batch8-2threads": ("1", 8, 2), "mkl0-batch1-1thread": ("0", 1, 1)}


@pytest.fixture(scope="module")
def slice_decodes(demo_inputs, tmp_path_factory) -> dict[str, Path]:
    """The fingerprint's slice decoded by each of :data:`SLICE_RUNS`, the processes started together
    (one takes two threads, the other one: together they fill the two cores); run id → its CSV."""
    out_dir = tmp_path_factory.mktemp("slice")
    outs = {}
    procs = {}
    for run_id, (mkl, batch_size, threads) in SLICE_RUNS.items():
        outs[run_id] = out_dir / f"{run_id}.csv"
        argv = [sys.executable, "-c", _DECODE, str(demo_inputs), str(outs[run_id]), str(batch_size),
                str(threads)]
        procs[run_id] = subprocess.Popen(argv, env=_clean_env(CT2_USE_MKL=mkl))
    for run_id, proc in procs.items():
        status = proc.wait(timeout=1800)
        assert status == 0, f"the slice decode {run_id} failed (status {status})"
    return outs


@pytest.mark.slow
@pinned_path_only
@pytest.mark.parametrize("run_id", list(SLICE_RUNS))
def test_slice_decodes_to_the_fingerprint(fingerprint, slice_decodes, run_id):
    """The fingerprint's slice decodes to its transcripts, whatever CT2_USE_MKL, threads and batch."""
    got = pd.read_csv(slice_decodes[run_id], dtype=str, keep_default_na=False)
    got = got[["id", "task", "response"]].sort_values(["task", "id"]).reset_index(drop=True)
    expected = _expected_rows(fingerprint)
    assert len(got) == len(expected) == 2 * fingerprint["slice"]["rule"]["n_stimuli"]
    differing = got.compare(expected, result_names=("here", "fingerprint"))
    assert differing.empty, f"{len(differing)} of {len(got)} transcripts differ:\n{differing.head(10)}"
