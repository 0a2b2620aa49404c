"""One numeric path for CTranslate2 (the embedded Whisper) on every x86-64 CPU.

CTranslate2 chooses its matrix-multiply backend and instruction set from the CPU it runs on: Intel
MKL on an Intel CPU, oneDNN elsewhere; AVX-512 where the CPU has it, else AVX2. oneDNN in turn picks
its own kernels (AVX-512 VNNI, AVX2 VNNI, AVX2). The int8 kernels of these paths round and saturate
differently, so the same stimulus can be transcribed differently on two machines: forcing MKL on one
AMD EPYC machine changed 13 of 150 demo transcripts.

:func:`pin_ctranslate2` sets the variables below *before* ``ctranslate2`` is imported, overriding
what the environment says, so every x86-64 machine with AVX2 takes oneDNN's AVX2 kernels and
CTranslate2's AVX2 code. Setting :data:`OPT_OUT_VARIABLE` (``AIP_CT2_NATIVE=1``) keeps
CTranslate2's own choice; the choice is recorded in every model run (:func:`numerics_record`).

Sources: CTranslate2's environment variables (``CT2_USE_MKL``, ``CT2_FORCE_CPU_ISA``,
``CT2_VERBOSE``: its documentation, "Environment variables"; read once, when the library
initialises) and oneDNN's ``ONEDNN_MAX_CPU_ISA`` (oneDNN documentation, "CPU dispatcher control").
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import sys

from aiplib.core.errors import AiplibError

#: The variables of the pinned path, set before ``ctranslate2`` is imported.
PINNED_ENVIRONMENT = {
    "CT2_USE_MKL": "0",
    "CT2_FORCE_CPU_ISA": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}

#: Set to 1 to keep CTranslate2's own backend and ISA (the record then says "native").
OPT_OUT_VARIABLE = "AIP_CT2_NATIVE"

#: Variables that can change a numeric path of this process (recorded where set).
NUMERIC_VARIABLES = (
    *PINNED_ENVIRONMENT,
    OPT_OUT_VARIABLE,
    "OPENBLAS_CORETYPE",
    "OMP_NUM_THREADS",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "DNNL_MAX_CPU_ISA",
)

#: What CTranslate2's verbose start-up log calls each field of :func:`backend_report`.
_VERBOSE_FIELDS = {
    "Selected ISA": "isa",
    "Use Intel MKL": "use_mkl",
    "SGEMM backend": "sgemm_backend",
    "GEMM_S8 backend": "gemm_s8_backend",
    "GEMM_S16 backend": "gemm_s16_backend",
}


def opted_out() -> bool:
    """True when :data:`OPT_OUT_VARIABLE` is set to ``1``/``true``/``yes``."""
    value = os.environ.get(OPT_OUT_VARIABLE, "").strip().lower()
    return value in ("1", "true", "yes")


def cpuinfo_field(name: str) -> str | None:
    """The value of the first ``name`` line of ``/proc/cpuinfo`` (``"model name"``, ``"flags"`` …),
    None where the file or the field does not exist."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def cpu_flags() -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where the file does not exist)."""
    flags = cpuinfo_field("flags")
    if flags is None:
        return set()
    return set(flags.split())


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``, else
    :func:`platform.processor`)."""
    model = cpuinfo_field("model name")
    if model:
        return model
    return platform.processor() or platform.machine()


def cpu_vendor() -> str:
    """The CPU vendor id (``GenuineIntel``, ``AuthenticAMD`` …; empty where unknown)."""
    return cpuinfo_field("vendor_id") or ""


def cpu_record() -> dict:
    """The CPU this process runs on, the part of every backend's ``numerics`` record that all share.

    ``{"cpu_model": str, "cpu_vendor": str, "cpu_avx512": bool, "environment": {name: value}}``
    (from ``/proc/cpuinfo``; model from :func:`platform.processor` and vendor ``""`` where that file
    does not exist; ``environment``: the :data:`NUMERIC_VARIABLES` set in this process, e.g. the
    pin's oneDNN cap, which also reaches a torch model loaded after the embedded Whisper). Never
    raises.
    """
    has_avx512 = "avx512f" in cpu_flags()
    environment = {name: os.environ[name] for name in NUMERIC_VARIABLES if name in os.environ}
    return {
        "cpu_model": cpu_model(),
        "cpu_vendor": cpu_vendor(),
        "cpu_avx512": has_avx512,
        "environment": environment,
    }


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def pin_ctranslate2() -> dict:
    """Fix CTranslate2's GEMM backend and ISA for this process; call before ``import ctranslate2``.

    On x86-64 sets :data:`PINNED_ENVIRONMENT` in ``os.environ`` (overriding values already there),
    unless :data:`OPT_OUT_VARIABLE` is set. Elsewhere (ARM) nothing is set: the record says so.

    Returns
    -------
    dict
        ``{"pinned": bool, "reason": str, "variables": {name: value}}`` (the values in force).

    Raises
    ------
    AiplibError
        ``ctranslate2`` was imported earlier in this process with other values (the pin would not
        take effect), or the CPU lacks AVX2 (the pinned path cannot run there: set
        ``AIP_CT2_NATIVE=1`` to run CTranslate2's own path, whose numbers may differ).
    """
    if opted_out():
        return _state("native: AIP_CT2_NATIVE is set")
    if not _is_x86():
        return _state(f"native: no pinned path on {platform.machine()}")
    flags = cpu_flags()
    if flags and "avx2" not in flags:
        raise AiplibError(
            "this CPU has no AVX2, so the embedded Whisper cannot run on the pinned numeric path "
            f"(oneDNN + AVX2); set {OPT_OUT_VARIABLE}=1 to use CTranslate2's own path "
            "(its transcripts may differ from the published demo's)"
        )
    already = sys.modules.get("ctranslate2") is not None
    differing = [
        name for name, value in PINNED_ENVIRONMENT.items() if os.environ.get(name) != value
    ]
    if already and differing:
        raise AiplibError(
            "ctranslate2 was imported before aiplib could pin its numeric path "
            f"({', '.join(differing)} differ); import aiplib's Whisper backend first, or set "
            f"{OPT_OUT_VARIABLE}=1"
        )
    os.environ.update(PINNED_ENVIRONMENT)
    return _state("pinned")


def _state(reason: str) -> dict:
    names = [*PINNED_ENVIRONMENT, OPT_OUT_VARIABLE]
    values = {name: os.environ[name] for name in names if name in os.environ}
    return {"pinned": reason == "pinned", "reason": reason, "variables": values}


def import_ctranslate2():
    """``ctranslate2``, imported after :func:`pin_ctranslate2` (errors as there)."""
    pin_ctranslate2()
    import ctranslate2  # noqa: PLC0415 - heavy optional dependency, imported after the pin

    return ctranslate2


#: The script :func:`backend_report` runs in a child process: it opens the model once, so that
#: CTranslate2 logs the backends it selected.
_PROBE = """
import sys
import ctranslate2
ctranslate2.models.Whisper(sys.argv[1], device="cpu", compute_type=sys.argv[2])
"""


@functools.lru_cache(maxsize=8)
def backend_report(weights_path: str, compute_type: str) -> dict:
    """What CTranslate2 says it selected for this process's environment: ISA, MKL, GEMM backends.

    Loads the model once in a child process with ``CT2_VERBOSE=1`` and the parent's (pinned)
    environment, and reads CTranslate2's start-up log. Values are the log's own words
    (``"AVX2"``, ``"DNNL (packed: false, u8s8 preferred: true)"``); a field the log lacks is absent.
    Cached per (weights, compute type). Never raises: a failed probe gives ``{"error": ...}``.
    """
    env = dict(os.environ, CT2_VERBOSE="1")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, weights_path, compute_type],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    report = {}
    for line in (done.stdout + done.stderr).splitlines():
        for label, key in _VERBOSE_FIELDS.items():
            marker = f"- {label}: "
            if marker in line:
                report[key] = line.split(marker, 1)[1].strip()
    if not report:
        return {"error": f"no CTranslate2 start-up log (exit {done.returncode})"}
    return report


def numerics_record(
    weights_path: str | None = None, compute_type: str = "int8", device: str = "cpu"
) -> dict:
    """The numeric path of this process, for the run log and provenance (JSON-serialisable).

    ``{"cpu_model", "cpu_vendor", "cpu_avx512": bool, "environment", "pinned", "reason",
    "variables", "ctranslate2": backend_report(...)}``; the CTranslate2 part only when
    ``weights_path`` is given, and on a GPU (``device`` not ``cpu``) only the device: the CPU pin
    does not apply to CUDA kernels.
    """
    state = pin_ctranslate2()
    record = cpu_record()
    record["pinned"] = state["pinned"]
    record["reason"] = state["reason"]
    record["variables"] = state["variables"]
    if weights_path is not None and device == "cpu":
        record["ctranslate2"] = backend_report(str(weights_path), compute_type)
    elif weights_path is not None:
        record["ctranslate2"] = {
            "device": device,
            "note": "CUDA kernels: the CPU pin does not apply",
        }
    return json.loads(json.dumps(record))
