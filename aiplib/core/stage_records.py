"""Stage records: whether a stage's notebook can be skipped because nothing it depends on changed.

After a stage succeeds, ``scripts/run_stage.sh`` writes ``<workspace>/executed/<stage>.stamp.json``
(:func:`write_record`): the SHA-256 of the notebook's source cells, of the ``aiplib`` package
source, of the papermill parameters the notebook received (after filtering to its declared ones),
of the relevant environment (``AIP_*`` variables and, from stage 6 on, the content of the
``$AIP_MODELS`` file or of ``<data root>/models.yaml``), and of every file the stage reads
(:data:`STAGE_READS`, plus the files under a folder or file parameter such as ``speech_dir``) and
wrote (:data:`STAGE_WRITES` and every file changed during the run). ``make all``, ``make NN`` and
``make stamps`` compare it with the workspace now (:func:`differences`): a stage is skipped when
nothing differs. Because outputs are hashed, a stage that re-runs and writes identical files does
not force the next ones.

File hashes are cached by (path, size, mtime in ns) in ``executed/.stage-hashes.json``, so a check
with nothing changed reads no file again.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from aiplib.core import papermill_args
from aiplib.core.atomic import write_text_atomic
from aiplib.core.hashing import file_sha256
from aiplib.core.workspace import MODELS_ENV, MODELS_FILE_NAME, SMOKE_ENV, SMOKE_VALUES

#: Version of the record format; a record of another version is stale.
RECORD_VERSION = 1
#: The stages in pipeline order (notebooks/NN_name.ipynb).
STAGES = (
    "01_download_data",
    "02_build_item_banks",
    "03_curate_backgrounds",
    "04_extract_descriptors",
    "05_build_manifests",
    "06_manipulation_checks",
    "07_run_inference",
    "08_score_outputs",
    "09_make_figures",
    "10_listen_and_explore",
)
#: What each stage reads of the workspace: folders or files relative to ``<data root>/<profile>``
#: (the notebooks' **Reads** lines). Files another stage of the same or a later position claims as
#: its outputs are left out (a stage's own outputs are checked as outputs).
STAGE_READS = {
    "01_download_data": (),
    "02_build_item_banks": ("raw",),
    "03_curate_backgrounds": ("raw",),
    "04_extract_descriptors": ("bg", "descriptors/battery.csv"),
    "05_build_manifests": ("raw", "itembanks", "bg", "descriptors/battery.csv"),
    "06_manipulation_checks": ("itembanks", "bg", "descriptors", "manifests"),
    "07_run_inference": ("raw", "itembanks", "bg", "manifests"),
    "08_score_outputs": ("itembanks", "manifests", "inference"),
    "09_make_figures": (
        "raw",
        "itembanks",
        "bg",
        "descriptors",
        "manifests",
        "checks",
        "inference",
        "results/scores",
        "results/tables",
    ),
    # the explorer: the scores, figures and tables it shows, the clips it plays
    "10_listen_and_explore": (
        "itembanks",
        "bg",
        "manifests",
        "inference",
        "results/scores",
        "results/tables",
        "results/figures",
    ),
}
#: What each stage writes (besides every file changed while it ran): a deleted or edited file
#: under these re-runs the stage. A file is owned by the last stage in pipeline order whose
#: record lists it.
STAGE_WRITES = {
    "01_download_data": ("raw",),
    "02_build_item_banks": ("itembanks",),
    "03_curate_backgrounds": ("bg", "descriptors/battery.csv"),
    "04_extract_descriptors": (
        "descriptors/acoustic_descriptors.csv",
        "descriptors/acoustic_descriptors.json",
    ),
    "05_build_manifests": ("manifests",),
    "06_manipulation_checks": ("checks",),
    "07_run_inference": ("inference",),
    "08_score_outputs": ("results/scores", "results/tables/coverage.csv"),
    "09_make_figures": ("results/tables", "results/figures", "results/provenance.json"),
    "10_listen_and_explore": (),
}
#: Papermill parameters naming a folder or file outside the workspace that the stage reads: the
#: files under them are inputs (custom folders and tables, ``make score``'s folders).
PATH_PARAMETERS = (
    "speech_dir",
    "texts",
    "kws_dir",
    "kws_labels",
    "backgrounds_dir",
    "distractors_dir",
    "distractor_texts",
    "inference_dir",
    "manifests_dir",
    "prompts_file",
)
#: Environment variables (names or name beginnings) that never change a stage's result (locking,
#: progress display, caches, where the data folder is: records hold paths relative to it, so a
#: copied folder stays up to date).
IGNORED_ENVIRONMENT = (
    "AIP_DATA_ROOT",
    "AIP_PROFILE",
    "AIP_LOCK_WAIT",
    "AIP_STAGE_LOCKED",
    "AIP_PLAIN_PROGRESS",
    "AIP_RUN_TAG",
    "AIP_FORCE",
    "AIP_STAGE_RECORD",
    "AIP_MODEL_CACHE",
    "AIP_LOCK_",
)
#: The stages that read the models file (``$AIP_MODELS``, else ``<data root>/models.yaml``): those
#: whose notebook imports ``aiplib.inference`` or a package after it (stage 6 decodes with the
#: registry's recogniser). Stages 1-5 import only core, io, sources, battery and stimuli, which the
#: import-linter contract keeps from importing ``aiplib.inference``, so neither the file nor
#: ``$AIP_MODELS`` is in their records: adding a model re-runs stage 6 on, never the download or
#: the mixing (tests/test_stamps.py checks the notebooks' imports against this list).
STAGES_READING_MODELS = (
    "06_manipulation_checks",
    "07_run_inference",
    "08_score_outputs",
    "09_make_figures",
    "10_listen_and_explore",
)
#: Files never hashed: stamps and records (they hold their writing time), the lock, the rendered
#: report (``make report``), partial files.
IGNORED_SUFFIXES = (".stamp.json", ".part", ".aip-lock", ".lock")
#: The rendered report (``make report``, after stage 9), never a stage's input or output.
REPORT_FILES = ("results/report.html", "results/report.md", "results/report.json")
#: The hash cache's file name in the executed folder.
CACHE_NAME = ".stage-hashes.json"
#: Files whose mtime is this many ns before the run's start still count as written by it (the
#: kernel's file clock may lag the wall clock by a tick).
CLOCK_SLACK_NS = 50_000_000


class HashCache:
    """SHA-256 of files keyed by (path, size, mtime ns), kept in ``executed/.stage-hashes.json``."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: dict = {}
        self.changed = False
        try:
            self.entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.entries = {}

    def sha256(self, path: Path) -> str:
        """Hex SHA-256 of ``path`` (cached; raises OSError when it cannot be read)."""
        st = path.stat()
        key = str(path)
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return hit[2]
        sha = file_sha256(path)
        self.entries[key] = [st.st_size, st.st_mtime_ns, sha]
        self.changed = True
        return sha

    def save(self) -> None:
        """Write the cache back when it changed (a failure to write is ignored: it is a cache)."""
        if not self.changed or not self.path.parent.is_dir():
            return
        try:
            write_text_atomic(self.path, json.dumps(self.entries, separators=(",", ":")))
        except OSError:
            pass


def _ignored(rel: str) -> bool:
    """True for a workspace file never hashed (:data:`IGNORED_SUFFIXES`, :data:`REPORT_FILES`,
    the executed folder)."""
    name = rel.rsplit("/", 1)[-1]
    return (
        rel.startswith("executed/")
        or rel in REPORT_FILES
        or name.startswith(".aip-lock")
        or name.endswith(IGNORED_SUFFIXES)
    )


def workspace_files(root: Path, prefixes) -> list[str]:
    """Files (paths relative to ``root``, sorted) at or under each of ``prefixes``, without the
    :func:`_ignored` ones."""
    found = set()
    for prefix in prefixes:
        top = root / prefix
        if top.is_file():
            found.add(prefix)
            continue
        if not top.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(top):
            for f in files:
                rel = (Path(dirpath) / f).relative_to(root).as_posix()
                if not _ignored(rel):
                    found.add(rel)
    return sorted(found)


def _pairs(args) -> list[tuple[str, str]]:
    """``(name, value)`` of each ``-p``/``-r`` option of papermill arguments."""
    out = []
    for i, option in enumerate(args[:-2]):
        if option in ("-p", "--parameters", "-r", "--parameters_raw"):
            out.append((args[i + 1], args[i + 2]))
    return out


def external_files(args) -> list[Path]:
    """Absolute paths of the files under the :data:`PATH_PARAMETERS` among ``args`` (sorted)."""
    found = set()
    for name, value in _pairs(args):
        if name not in PATH_PARAMETERS or not value:
            continue
        top = Path(value).expanduser().resolve()
        if top.is_file():
            found.add(top)
        elif top.is_dir():
            for dirpath, _dirs, files in os.walk(top):
                found.update(Path(dirpath) / f for f in files)
    return sorted(found)


def notebook_sha256(notebook: Path) -> str:
    """SHA-256 of a notebook's cells (type and source only: outputs and ids do not count).

    Raises OSError or ValueError when the notebook cannot be read."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    cells = [[c.get("cell_type"), "".join(c.get("source", ""))] for c in nb.get("cells", [])]
    return hashlib.sha256(json.dumps(cells).encode("utf-8")).hexdigest()


def package_sha256(cache: HashCache) -> str:
    """SHA-256 over every source file of the ``aiplib`` package (path and content)."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(pkg)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            p = Path(dirpath) / f
            h.update(f"{p.relative_to(pkg).as_posix()}\0{cache.sha256(p)}\n".encode())
    return h.hexdigest()


def environment(root: Path, cache: HashCache, stage: str) -> dict:
    """The environment that can change ``stage``'s result: every ``AIP_*`` variable but
    :data:`IGNORED_ENVIRONMENT` (as SHA-256 of its value, so no secret is written) and, for the
    stages of :data:`STAGES_READING_MODELS` only, ``$AIP_MODELS`` and the content of the models file
    (``$AIP_MODELS``, else ``<data root>/models.yaml``)."""
    reads_models = stage in STAGES_READING_MODELS
    out = {}
    for name in sorted(os.environ):
        if not name.startswith("AIP_") or name.startswith(IGNORED_ENVIRONMENT):
            continue
        if name == MODELS_ENV and not reads_models:
            continue
        out[name] = hashlib.sha256(os.environ[name].encode("utf-8")).hexdigest()
    if not reads_models:
        return out
    models = Path(os.environ.get(MODELS_ENV) or root.parent / MODELS_FILE_NAME).expanduser()
    if models.is_file():
        out["models file"] = cache.sha256(models.resolve())
    return out


def record_path(out_dir, stage: str) -> Path:
    """``<executed>/<stage>.stamp.json``."""
    return Path(out_dir) / f"{stage}.stamp.json"


def read_record(path) -> dict | None:
    """The record at ``path``, or None when missing or unreadable."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _owners(out_dir: Path) -> dict[str, int]:
    """Workspace file → index in :data:`STAGES` of the last stage whose record lists it as an
    output."""
    owner: dict[str, int] = {}
    for k, stage in enumerate(STAGES):
        rec = read_record(record_path(out_dir, stage)) or {}
        for rel in rec.get("outputs", {}):
            owner[rel] = k
    return owner


def _hash_all(root: Path, rels, cache: HashCache) -> dict:
    """``{rel: sha256 or "missing"}`` of workspace files."""
    out = {}
    for rel in rels:
        p = root / rel
        if p.is_file():
            out[rel] = cache.sha256(p)
        else:
            out[rel] = "missing"
    return out


def current_state(stage: str, notebook: Path, out_dir: Path, args, cache: HashCache) -> dict:
    """Everything of a record but its outputs, as it is now (the ``args`` already filtered)."""
    root = Path(out_dir).resolve().parent
    k = STAGES.index(stage)
    owner = _owners(out_dir)
    reads = [rel for rel in workspace_files(root, STAGE_READS[stage]) if owner.get(rel, -1) < k]
    inputs = _hash_all(root, reads, cache)
    for p in external_files(args):
        inputs[str(p)] = cache.sha256(p)
    return {
        "record_version": RECORD_VERSION,
        "stage": stage,
        "notebook": notebook_sha256(notebook),
        "aiplib": package_sha256(cache),
        "parameters": list(args),
        "environment": environment(root, cache, stage),
        "inputs": dict(sorted(inputs.items())),
    }


def write_record(stage: str, notebook, out_dir, args, start_ns: int) -> Path:
    """Write ``<executed>/<stage>.stamp.json`` after a successful run that started at
    ``start_ns`` (ns since the epoch): the current state (:func:`current_state`) and, as outputs,
    the files under :data:`STAGE_WRITES`, those listed by the previous record and every workspace
    file changed since ``start_ns``, less those a later stage's record owns."""
    out_dir = Path(out_dir).resolve()
    root = out_dir.parent
    cache = HashCache(out_dir / CACHE_NAME)
    path = record_path(out_dir, stage)
    previous = read_record(path) or {}
    k = STAGES.index(stage)
    owner = _owners(out_dir)
    rels = set(workspace_files(root, STAGE_WRITES[stage])) | set(previous.get("outputs", {}))
    for rel in workspace_files(root, [p.name for p in root.iterdir()]):
        if (root / rel).stat().st_mtime_ns >= start_ns - CLOCK_SLACK_NS:
            rels.add(rel)
    rels = {r for r in rels if owner.get(r, k) <= k and (root / r).is_file()}
    state = current_state(stage, Path(notebook), out_dir, args, cache)
    state["inputs"] = {r: v for r, v in state["inputs"].items() if r not in rels}
    state["outputs"] = _hash_all(root, sorted(rels), cache)
    state["written"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    write_text_atomic(path, json.dumps(state, indent=1, ensure_ascii=False) + "\n")
    cache.save()
    return path


def _dict_differences(kind: str, old: dict, new: dict) -> list[str]:
    """One line per key added, removed or changed between two ``{name: sha256}``."""
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            out.append(f"{kind} added: {key}")
        elif key not in new or new[key] == "missing":
            out.append(f"{kind} missing: {key}")
        elif old[key] != new[key]:
            out.append(f"{kind} changed: {key}")
    return out


def differences(stage: str, notebook, out_dir, args, cache: HashCache) -> list[str]:
    """Why ``stage`` must run again (empty: up to date): no record, the notebook, the aiplib
    source, the parameters or the environment changed, an input was added, removed or changed,
    an output it owns is missing or edited, or its executed copy is gone."""
    out_dir = Path(out_dir).resolve()
    old = read_record(record_path(out_dir, stage))
    if old is None:
        return ["no record of a successful run"]
    if old.get("record_version") != RECORD_VERSION:
        return [f"record version {old.get('record_version')} → {RECORD_VERSION}"]
    if not (out_dir / f"{stage}.ipynb").is_file():
        return [f"executed copy missing: executed/{stage}.ipynb"]
    now = current_state(stage, Path(notebook), out_dir, args, cache)
    why = []
    if old.get("notebook") != now["notebook"]:
        why.append(f"notebook changed: {Path(notebook).name}")
    if old.get("aiplib") != now["aiplib"]:
        why.append("aiplib source changed")
    if old.get("parameters") != now["parameters"]:
        why.append(
            f"parameters changed: {' '.join(old.get('parameters', []))!r} → "
            f"{' '.join(now['parameters'])!r}"
        )
    why += _dict_differences("environment", old.get("environment", {}), now["environment"])
    owned = set(old.get("outputs", {}))
    inputs = {r: v for r, v in now["inputs"].items() if r not in owned}
    why += _dict_differences("input", old.get("inputs", {}), inputs)
    root = out_dir.parent
    k = STAGES.index(stage)
    owner = _owners(out_dir)
    mine = {r: v for r, v in old.get("outputs", {}).items() if owner.get(r, k) <= k}
    why += _dict_differences("output", mine, _hash_all(root, sorted(mine), cache))
    return why


def filtered_args(notebook: Path, args) -> list[str]:
    """The papermill arguments ``notebook`` receives (as ``scripts/run_stage.sh`` filters them;
    which of the others are typos is :func:`main`'s question, asked once)."""
    declared = papermill_args.notebook_parameters(notebook)
    kept, _dropped, _unknown = papermill_args.filter_papermill_args(list(args), declared)
    return kept


def _stage_name(given: str) -> str | None:
    """The :data:`STAGES` name of ``given`` (``"02"`` or ``"02_build_item_banks"``); None for
    another notebook (``make run-stage STAGE=…`` of a notebook folder of one's own: never
    skipped, no record)."""
    for stage in STAGES:
        if given in (stage, stage[:2]):
            return stage
    return None


def _index(given, default: int) -> int:
    """Index in :data:`STAGES` of ``given``; ``default`` when empty or not a stage."""
    stage = _stage_name(given or "")
    if stage is None:
        return default
    return STAGES.index(stage)


def _input_reasons(why: list[str]) -> list[str]:
    """The reasons of :func:`differences` other than the stage's own outputs: an upstream stage
    of ``make NN`` re-runs for a changed input, notebook, code, parameter or environment, not
    because its outputs were written by someone else (stage 7 run in JupyterLab or by hand)."""
    return [w for w in why if not w.startswith("output ")]


def built_at_smoke_size(out_dir, stage: str = "02_build_item_banks") -> bool:
    """``stage`` ran with ``$AIP_SMOKE`` on (its record holds the variable's SHA-256, written by
    :func:`environment`, equal to that of one of :data:`aiplib.core.workspace.SMOKE_VALUES`), so
    its outputs are smoke-size; False without a record."""
    record = read_record(record_path(Path(out_dir), stage)) or {}
    recorded = record.get("environment", {}).get(SMOKE_ENV)
    smoke_hashes = {hashlib.sha256(v.encode("utf-8")).hexdigest() for v in SMOKE_VALUES}
    return recorded in smoke_hashes


def _ran_here(stage: str, out_dir: Path) -> bool:
    """``stage`` has a record or an executed copy in ``out_dir``."""
    return read_record(record_path(out_dir, stage)) is not None or (
        out_dir / f"{stage}.ipynb"
    ).is_file()


def never_run(stage: str, out_dir) -> bool:
    """``stage`` has never run in this data folder and the pipeline has not gone past it: no
    record, no executed copy and none of the files it writes (:data:`STAGE_WRITES`), and no later
    stage has a record or an executed copy. A stage run before records or in JupyterLab left
    files; a folder scored by ``make score`` (stages 8-9 on inference files from elsewhere) has
    stage 8's record: neither is "never run"."""
    out_dir = Path(out_dir).resolve()
    k = STAGES.index(stage)
    if any(_ran_here(later, out_dir) for later in STAGES[k:]):
        return False
    return not workspace_files(out_dir.parent, STAGE_WRITES[stage])


def next_stage(a, args) -> str:
    """The first stage after ``a.after`` that must run, "" when none; one line on stderr for each
    stage skipped. ``a.only``: that stage alone; ``a.before`` (the stages upstream of ``make NN``):
    a stage that never ran here runs (:func:`never_run`); one without a record that left files is
    not run (as before records); one with a record runs when its inputs, notebook, code,
    parameters or environment changed (:func:`_input_reasons`)."""
    nbdir = Path(a.notebooks)
    out_dir = Path(a.out)
    cache = HashCache(out_dir / CACHE_NAME)
    if a.only and _stage_name(a.only) is None:
        return a.only
    first = _index(a.after, -1) + 1
    last = len(STAGES) - 1
    upstream_only = bool(a.before)
    if a.before:
        last = _index(a.before, 0) - 1
    if a.only:
        first = _index(a.only, 0)
        last = first
    try:
        for stage in STAGES[first : last + 1]:
            target = not upstream_only
            if a.force and target:
                return stage
            notebook = nbdir / f"{stage}.ipynb"
            if not notebook.is_file():
                return stage  # papermill reports the missing notebook
            if not target and read_record(record_path(out_dir, stage)) is None:
                if never_run(stage, out_dir):
                    line = f"=== stage {stage}: runs — never run in this data folder"
                    print(line, file=sys.stderr)
                    return stage
                continue
            why = differences(stage, notebook, out_dir, filtered_args(notebook, args), cache)
            if not target:
                why = _input_reasons(why)
            if why:
                more = f" (+{len(why) - 3} more)" * (len(why) > 3)
                print(f"=== stage {stage}: runs — {'; '.join(why[:3])}{more}", file=sys.stderr)
                return stage
            print(
                f"=== stage {stage}: up to date (inputs, parameters and code unchanged) — skipped",
                file=sys.stderr,
            )
        return ""
    finally:
        cache.save()


def status(a, args) -> int:
    """``make stamps``: for each stage, up to date, or why the next ``make all`` runs it (an
    earlier stage that runs may change its inputs: "may follow"). Exit 1 when one would run."""
    t0 = time.perf_counter()
    nbdir = Path(a.notebooks)
    out_dir = Path(a.out)
    cache = HashCache(out_dir / CACHE_NAME)
    n_run = 0
    for stage in STAGES:
        notebook = nbdir / f"{stage}.ipynb"
        why = differences(stage, notebook, out_dir, filtered_args(notebook, args), cache)
        if why:
            state = "RUNS — " + "; ".join(why[:5]) + f" (+{len(why) - 5} more)" * (len(why) > 5)
        elif n_run:
            state = "up to date (may follow an earlier stage that runs)"
        else:
            state = "up to date"
        n_run += bool(why)
        print(f"{stage}: {state}")
    cache.save()
    print(
        f"{n_run} of {len(STAGES)} stage(s) would run ({time.perf_counter() - t0:.1f} s); "
        f"FORCE=1 runs them all"
    )
    return 1 if n_run else 0


def main(argv=None) -> int:
    """``python -m aiplib.core.stage_records next|status|record …`` (the Makefile and
    ``scripts/run_stage.sh``): ``next --notebooks D --out O [--after S] [--before S | --only S]
    [--force] -- ARGS`` prints the next stage to run; ``status … -- ARGS`` lists every stage's
    state; ``record STAGE --notebooks D --out O --start-ns N -- ARGS`` (ARGS already filtered)
    writes the record of a successful run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = []
    if "--" in argv:
        cut = argv.index("--")
        args = argv[cut + 1 :]
        argv = argv[:cut]
    ap = argparse.ArgumentParser(prog="python -m aiplib.core.stage_records")
    ap.add_argument("command", choices=("next", "status", "record"))
    ap.add_argument("stage", nargs="?", default=None)
    ap.add_argument("--notebooks", default="notebooks")
    ap.add_argument("--out", required=True)
    ap.add_argument("--after", default=None)
    ap.add_argument("--before", default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--start-ns", type=int, default=0)
    a = ap.parse_args(argv)
    if a.command in ("next", "status"):
        known = papermill_args.known_parameters(Path(a.notebooks))
        unknown = papermill_args.unknown_names(args, known)
        if unknown:  # a typo: refused before a stage is chosen, as the stage's filter refuses it
            line = papermill_args.unknown_names_line(Path(a.notebooks), unknown, known)
            print(line, file=sys.stderr)
            return 2
    if a.command == "next":
        print(next_stage(a, args))
        return 0
    if a.command == "status":
        return status(a, args)
    stage = _stage_name(a.stage or "")
    if stage is None:
        return 0
    write_record(stage, Path(a.notebooks) / f"{stage}.ipynb", a.out, args, a.start_ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
