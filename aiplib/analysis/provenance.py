"""Provenance: a JSON sidecar next to every results file, and one record for the whole run.

``results/<dir>/<name>.<ext>`` gets ``results/<dir>/<name>.json`` under the key ``"provenance"``
(other keys, e.g. the scoring metadata of ``results/scores/<task>.json``, are kept); files sharing a
stem (a figure's PNG and PDF, ``report.md`` / ``.html``) share one sidecar.
``results/provenance.json`` is the run-level record (:func:`collect_provenance`), read by
:func:`aiplib.analysis.comparison.compare_runs`. No time stamps: the same inputs give the same
  bytes.
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from pathlib import Path

import pandas as pd

from aiplib.core import __version__
from aiplib.core.errors import AiplibError
from aiplib.core.hashing import file_sha256
from aiplib.core.tasks import TASK_FAMILIES, task_file
from aiplib.core.textnorm import NORMALIZER_NAME, NORMALIZER_VERSION
from aiplib.core.versions import package_versions
from aiplib.core.workspace import repo_root
from aiplib.inference.models import get_entry
from aiplib.inference.prompts import PROMPTS, TASKS, get_prompt_set, prompt_set_record
from aiplib.io.formats import read_inference_jsonl, read_manifest_meta, write_json_atomic
from aiplib.stimuli.manifests import manifest_hash

log = logging.getLogger(__name__)

#: Run-level record, directly under ``results/``.
PROVENANCE_FILE = "provenance.json"

#: Key under which a sidecar holds the provenance (other keys of an existing sidecar are kept).
SIDECAR_KEY = "provenance"

#: Distributions whose versions every provenance record holds (``openai-whisper`` supplies the
#: Whisper-style normaliser,
#: :mod:`aiplib.core.textnorm_whisper`).
_PACKAGES = ("numpy", "scipy", "pandas", "jiwer", "openai-whisper", "matplotlib")


def shareable(value, data_root=None):
    """``value`` (a record: dicts, lists, strings) with every absolute path under the data root, the
    project, the Python environment or the home folder written as ``<data root>/…``,
    ``<project>/…``, ``<python env>/…`` or ``~/…``; other values unchanged."""
    if isinstance(value, dict):
        return {k: shareable(v, data_root) for k, v in value.items()}
    if isinstance(value, list):
        return [shareable(v, data_root) for v in value]
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    for root, label in [
        (data_root, "<data root>"),
        (repo_root(), "<project>"),
        (sys.prefix, "<python env>"),
        (Path.home(), "~"),
    ]:
        for r in {str(root).rstrip("/"), str(Path(root).resolve()).rstrip("/")} if root else ():
            if r and (value == r or value.startswith(r + "/")):
                return label + value[len(r) :]
    return value


def _read_json(p: Path) -> dict | None:
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def numeric_paths(runs: list[dict]) -> list[dict]:
    """The distinct numeric paths (``info.numerics`` of :meth:`Recogniser.info`: CPU model and
    vendor, ISA, GEMM backend, threads …) of the ``run`` records of one model's run log that decoded
    rows (``n_done`` > 0), in the order first seen, each with ``runs`` (how many) and ``rows`` (rows
    they decoded). A run logged without a numeric path (an older aiplib) counts as
    ``{"not_recorded": …}``. Several entries mean the rows were decoded on different paths.
    """
    paths, keys = [], []
    for run in runs:
        n_done = run.get("n_done") or 0
        if n_done <= 0:
            continue
        numerics = (run.get("info") or {}).get("numerics")
        if not isinstance(numerics, dict):
            numerics = {"not_recorded": "the run log has no numeric path (an older aiplib)"}
        key = json.dumps(numerics, sort_keys=True)
        if key not in keys:
            keys.append(key)
            paths.append({**numerics, "runs": 0, "rows": 0})
        entry = paths[keys.index(key)]
        entry["runs"] += 1
        entry["rows"] += int(n_done)
    return paths


def debian_packages(ws) -> dict:
    """The Debian packages the workspace's inputs come from, as stage 1 recorded them
    (``raw/debian_packages.csv``, :func:`aiplib.sources.corpora.demo.record_debian_packages`).

    Returns ``{"source": str, "packages": [{package, role, status, version, architecture,
    source_package, deb_sha256, sha256_source}]}``; ``packages`` is empty, and ``source`` says why,
    when the file does not exist (a profile not built from Debian packages, or an older stage 1).
    """
    path = ws.debian_packages_csv
    if not path.is_file():
        return {
            "source": "not recorded: no raw/debian_packages.csv (not the demo profile, or "
            "stage 1 of an older aiplib)",
            "packages": [],
        }
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {"source": "raw/debian_packages.csv (stage 1)", "packages": table.to_dict("records")}


def models_with_rows(ws) -> set[str]:
    """The models with a non-empty task file (``inference/<model>/<task>.jsonl``, shard files
    included; never ``run_log.jsonl``) in ``ws.inference``: the models that produced rows."""
    inf = Path(ws.inference)
    if not inf.is_dir():
        return set()
    return {
        p.parent.name
        for p in inf.glob("*/*.jsonl")
        if not p.name.startswith("run_log") and p.stat().st_size > 0
    }


def model_records(ws, scored_models=()) -> dict:
    """Model id → what its ``inference/<model>/run_log.jsonl`` says, for every model that produced
    rows (:func:`models_with_rows`) and every id in ``scored_models``: the last run's revision,
    weights, weights SHA-256, decoding path, window and versions (the registry's revision and
    weights when no run is logged), ``numerics`` (the numeric paths of the runs that decoded rows,
    :func:`numeric_paths`), ``revision_source`` (where these come from), and ``not_applicable``
    (task → reason) when its steering tasks were not run because it takes no task prompt. A model
    whose run log holds no row-producing run (one that failed to load) is not here:
    :func:`models_not_loaded`."""
    inf = Path(ws.inference)
    out = {}
    for m in sorted(set(scored_models) | models_with_rows(ws)):
        rec = {
            "id": m,
            "revision": None,
            "weights": None,
            "weights_sha256": None,
            "decoding_path": None,
            "window": None,
            "versions": None,
            "numerics": [],
        }
        log_p = inf / m / "run_log.jsonl"
        logged = False
        if log_p.is_file():
            logged = _add_run_log(rec, log_p)
        if logged:
            rec["revision_source"] = "inference/<model>/run_log.jsonl"
        else:
            _add_registry_revision(rec, m)
        out[m] = rec
    return out


def models_not_loaded(ws) -> dict[str, str]:
    """Model id → the one-line reason of its last failed load (``load_failed`` in
    ``inference/<model>/run_log.jsonl``), for the models that have a run log but produced no rows
    (e.g. a GPU entry of ``MODEL=all`` on a CPU machine); {} when there are none."""
    inf = Path(ws.inference)
    if not inf.is_dir():
        return {}
    have_rows = models_with_rows(ws)
    out = {}
    for log_p in sorted(inf.glob("*/run_log.jsonl")):
        if log_p.parent.name in have_rows:
            continue
        rows, _ = read_inference_jsonl(log_p, require_id=False)
        failed = [r for r in rows if r.get("event") == "load_failed"]
        if failed:
            reason = str(failed[-1].get("error") or failed[-1].get("error_type") or "unknown")
            out[log_p.parent.name] = reason.splitlines()[0] if reason else "unknown"
    return out


#: What a model record copies from its last logged run.
_RUN_KEYS = ("revision", "weights", "weights_sha256", "window", "versions")


def _add_run_log(rec: dict, log_p: Path) -> bool:
    """Add what ``run_log.jsonl`` says to a model record: inapplicable tasks, numeric paths and the
    last run's revision, weights, decoding path, window and versions; True when a ``run`` is logged
    (its revision may be null: a packaged model has none)."""
    rows, _ = read_inference_jsonl(log_p, require_id=False)
    na = [r for r in rows if r.get("event") == "not_applicable"]
    if na:  # a model that takes no task prompt: its steering tasks were not run
        rec["not_applicable"] = dict(na[-1].get("tasks") or {})
    runs = [r for r in rows if r.get("event", "run") == "run"]
    rec["numerics"] = numeric_paths(runs)
    if runs:
        last = runs[-1]
        for key in _RUN_KEYS:
            rec[key] = last.get(key)
        rec["decoding_path"] = last.get("decoding", last.get("path"))
    return bool(runs)


def _add_registry_revision(rec: dict, model: str) -> None:
    """The registry's revision and weights of a model without a logged run (its source said)."""
    try:
        entry = get_entry(model)
    except Exception:  # noqa: BLE001 - an unknown id is recorded as such
        rec["revision_source"] = "unknown (no run log, not in the registry)"
        return
    rec["revision"] = getattr(entry, "revision", None)
    rec["weights"] = rec["weights"] or getattr(entry, "weights", None)
    rec["revision_source"] = "registry (no run_log.jsonl entry)"


def _paper_set_offline(ws) -> dict:
    """The ``paper`` prompt set's record without a download: from the cached copy of the authors'
    file (``raw/prompts/<commit>/``) when stage 7 fetched it, else the set's name and source with
    no texts (``tasks`` empty, ``fetched`` false) — never the built-in set's texts."""
    spec = task_file()["prompt_sets"]["paper"]
    src = spec["source"]
    cached = Path(ws.raw) / "prompts" / src["commit"] / Path(src["path"]).name
    if cached.is_file():
        try:
            return prompt_set_record(get_prompt_set("paper", ws=ws))
        except Exception as exc:  # noqa: BLE001 - a bad cached copy: recorded, not fatal here
            log.warning("paper prompt set not read from %s: %s", cached, exc)
    return {
        "prompt_set": "paper",
        "kws_answer": spec["kws_answer"],
        "source": {
            "kind": "url",
            "repo": src.get("repo"),
            "base_url": src["base_url"],
            "commit": src["commit"],
            "path": src["path"],
            "fetched": False,
        },
        "sha256": None,
        "variable": src.get("variable", "PROMPTS"),
        "texts_sha256": None,
        "tasks": {},
        "other_keys": [],
        "note": "the texts are those of the authors' file at this commit; not fetched when scoring",
    }


def _prompt_set_used(ws) -> dict | None:
    """The prompt-set record (name, source, SHA-256, texts) of the latest stage-7 run, read from
    ``inference/*/run_log.jsonl`` (not re-resolved: that could need a download); else the
    profile's set as resolved offline, or None when it cannot be."""
    best, inf = None, Path(ws.inference)
    for log_p in sorted(inf.glob("*/run_log.jsonl")) if inf.is_dir() else []:
        rows, _ = read_inference_jsonl(log_p, require_id=False)
        for r in rows:
            if isinstance(r.get("prompt_set"), dict) and (
                best is None or str(r.get("end", "")) >= best[0]
            ):
                best = (str(r.get("end", "")), r["prompt_set"])
    if best:
        return best[1]
    if getattr(ws, "profile", None) == "paper":
        return _paper_set_offline(ws)  # the authors' file is fetched by stage 7, never by a report
    try:
        return prompt_set_record(get_prompt_set(getattr(ws, "profile", None), ws=ws))
    except Exception:  # noqa: BLE001 - an unknown profile name: no record
        return None


def collect_provenance(ws, *, seed=None, n_resamples=None, level=None, extra=None) -> dict:
    """The run-level provenance record of a workspace, with the analysis settings ``seed,
    n_resamples, level`` (bootstrap) and ``extra`` merged in last (e.g. ``{"min_diff_pp": 2.0}``).

    Returns
    -------
    dict
        Keys ``profile, aiplib_version, versions, normalizer {name, version, source}, answer_rules
        {task: {response_cleanup {name, rule}, null_answer {name, rule}, n_cleaned,
        n_null_as_text}}, models {id: {revision, weights, weights_sha256, decoding_path, window,
        versions, numerics, revision_source}} (the models that produced rows),
        models_not_loaded {id: one-line reason} (:func:`models_not_loaded`), tasks {task: {family,
        variant, prompt_id, text}},
        prompt_ids_scored {task: {model: {prompt_id: n}}}, manifests {family: {sha256, seed_start,
        n_rows}}, debian_packages {source, packages} (:func:`debian_packages`), analysis {seed,
        n_resamples, level}`` plus ``extra``; local paths as :func:`shareable` writes them.
    """
    sidecars = _score_sidecars(Path(ws.results) / "scores")
    prompt_ids = {}
    scored_models = set()
    for task, meta in sidecars.items():
        if "prompt_ids" in meta:
            prompt_ids[task] = meta["prompt_ids"]
            scored_models |= set(meta["prompt_ids"])
    ps_rec = _prompt_set_used(ws)
    rec = {
        "profile": getattr(ws, "profile", None),
        "aiplib_version": __version__,
        "versions": {
            "aiplib": __version__,
            "python": platform.python_version(),
            **package_versions(_PACKAGES),
        },
        "normalizer": _normalizer_record(sidecars),
        "answer_rules": _answer_rules(sidecars),
        "models": model_records(ws, scored_models),
        "models_not_loaded": models_not_loaded(ws),
        "tasks": _task_records(ps_rec),
        "prompt_ids_scored": prompt_ids,
        "prompt_set": ps_rec,
        "manifests": _manifest_records(ws),
        "debian_packages": debian_packages(ws),
        "analysis": {"seed": seed, "n_resamples": n_resamples, "level": level},
    }
    rec.update(extra or {})
    return shareable(rec, Path(ws.root).parent if getattr(ws, "root", None) else None)


def _score_sidecars(scores_dir: Path) -> dict[str, dict]:
    """Task → its ``results/scores/<task>.json`` sidecar (``{}`` when unreadable), in name order."""
    if not scores_dir.is_dir():
        return {}
    return {side.stem: _read_json(side) or {} for side in sorted(scores_dir.glob("*.json"))}


def _answer_rules(sidecars: dict) -> dict:
    """Task → the answer rules stage 8 scored it with, and how many answers they changed."""
    rules = {}
    for task, meta in sidecars.items():
        if isinstance(meta.get("answer_rules"), dict):
            rules[task] = {
                **meta["answer_rules"],
                "n_cleaned": meta.get("n_cleaned"),
                "n_null_as_text": meta.get("n_null_as_text"),
            }
    return rules


def _normalizer_key(item) -> str:
    """Sort key of a ``((name, version), task)`` item."""
    return str(item[0])


def _normalizer_record(sidecars: dict) -> dict:
    """The text normaliser the score files were made with (the installed one without a sidecar;
    ``conflict`` lists them when they differ)."""
    norms = {}
    for task, meta in sidecars.items():
        normalizer = meta.get("normalizer")
        if isinstance(normalizer, dict):
            norms[(normalizer.get("name"), normalizer.get("version"))] = task
    if not norms:
        return {
            "name": NORMALIZER_NAME,
            "version": NORMALIZER_VERSION,
            "source": "installed (no score sidecar found)",
        }
    (name, version), _ = sorted(norms.items(), key=_normalizer_key)[0]
    record = {"name": name, "version": version, "source": "results/scores/*.json"}
    if len(norms) > 1:
        log.warning("score files were made with different normalisers: %s", sorted(norms))
        record["conflict"] = [list(k) for k in sorted(norms, key=str)]
    return record


def _manifest_records(ws) -> dict:
    """Task family → digest, first seed, row count and file of its manifest (present ones)."""
    manifests = {}
    for fam in TASK_FAMILIES:
        if not ws.manifest_csv(fam).is_file():
            continue
        meta = read_manifest_meta(ws, fam)
        manifests[fam] = {
            "sha256": manifest_hash(ws, fam),
            "seed_start": meta.get("seed_start"),
            "n_rows": meta.get("n_rows"),
            "file": f"manifests/{fam}.csv",
        }
    return manifests


def _task_records(ps_rec: dict | None) -> dict:
    """Task → family, variant and prompt; the prompt set used (``ps_rec``) replaces the built-in
    texts (with None when its texts were not fetched)."""
    tasks = {
        t: {"family": fam, "variant": var, **PROMPTS[(fam, var)]} for t, (fam, var) in TASKS.items()
    }
    if not ps_rec:
        return tasks
    known = ps_rec.get("tasks") or {}
    for t in tasks:
        if t in known:
            tasks[t].update(prompt_id=known[t].get("prompt_id"), text=known[t].get("text"))
        elif not known:  # a set whose texts were not fetched: never the built-in texts
            tasks[t].update(prompt_id=None, text=None)
        tasks[t]["prompt_set"] = ps_rec.get("prompt_set")
    return tasks


def write_sidecar(path, *, root=None, provenance=None, extra: dict | None = None) -> Path:
    """Write (or update) ``<dir>/<stem>.json``, the sidecar of the results file ``path``; return its
    path.

    Under ``"provenance"`` (replaced; other keys kept): ``files``, every file sharing the stem (a
    figure's PNG and PDF) with its size and SHA-256 and its path relative to ``root`` (default: the
    file's folder), then the run record ``provenance`` (:func:`collect_provenance`) and the fields
    of ``extra`` (e.g. ``{"seed": 0}``).

    Raises
    ------
    AiplibError
        If ``path`` does not exist or is itself a ``.json`` file.
    """
    p = Path(path)
    if not p.is_file():
        raise AiplibError(f"{p}: no such results file; cannot write its sidecar")
    if p.suffix == ".json":
        raise AiplibError(f"{p} is a JSON file; sidecars are written for data files only")
    side = p.with_suffix(".json")
    base = (Path(root) if root is not None else p.parent).resolve()
    obj = _read_json(side) or {}
    siblings = sorted(
        q
        for q in p.parent.glob(f"{p.stem}.*")
        if q.is_file() and q.suffix not in (".json", ".part") and q.stem == p.stem
    )
    files = [
        {
            "file": q.resolve().relative_to(base).as_posix()
            if q.resolve().is_relative_to(base)
            else str(q),
            "bytes": q.stat().st_size,
            "sha256": file_sha256(q),
        }
        for q in siblings
    ]
    obj[SIDECAR_KEY] = {"files": files, **(provenance or {}), **(extra or {})}
    return write_json_atomic(obj, side)


def annotate_results(
    ws, *, seed=None, n_resamples=None, level=None, extra=None, exclude=()
) -> list[Path]:
    """Write ``results/provenance.json`` (:func:`collect_provenance` of the settings) and a sidecar
    for every results file not named in ``exclude``; return the run record's path, then every
    sidecar's."""
    results = Path(ws.results)
    rec = collect_provenance(ws, seed=seed, n_resamples=n_resamples, level=level, extra=extra)
    # results/ is created if absent
    written = [write_json_atomic(rec, results / PROVENANCE_FILE)]
    done = set()
    for p in sorted(results.rglob("*")):
        if (
            p.is_file()
            and p.suffix not in (".json", ".part")
            and p.name not in exclude
            and not p.name.startswith(".")
            and (p.parent, p.stem) not in done
        ):
            done.add((p.parent, p.stem))
            written.append(write_sidecar(p, root=results, provenance=rec))
    return written


def read_provenance(results_dir) -> dict:
    """The run record ``<results_dir>/provenance.json``.

    Raises
    ------
    AiplibError
        If it is missing or not valid JSON (say which file).
    """
    p = Path(results_dir) / PROVENANCE_FILE
    obj = _read_json(p)
    if obj is None:
        raise AiplibError(
            f"{p} is missing or unreadable: the run's manifests and normaliser "
            "cannot be verified (run stage 9, notebook 09, first)"
        )
    return obj
