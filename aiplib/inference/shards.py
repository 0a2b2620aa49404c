"""Stage 7 over many GPUs or nodes: stable shards of the stimuli, and their merge.

A shard ``(i, n)`` decodes the stimuli whose id hashes to ``i`` (:func:`shard_of`) and writes only
files of its own (``<task>.shard-<i>-of-<n>.jsonl``, ``run_log.shard-…``,
``checks/mix_diagnostics.shard-….csv``, a ``flock``'ed ``.shard-<i>-of-<n>.lock``); it reads
``<task>.jsonl`` but never rewrites it.
:func:`merge_all` (``make merge``, stage 8) appends the shards' rows to ``<task>.jsonl``, sets aside
the main rows they supersede and moves the shard files to ``merged-shards/``. The shard lock is the
``flock`` of :mod:`aiplib.core.lock`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from aiplib.core.atomic import write_bytes_atomic
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.lock import LOCKING_SUPPORTED, open_lock_file, try_flock
from aiplib.inference.run_records import MIX_DIAG_FIELDS
from aiplib.io.formats import (
    append_jsonl_lines,
    inference_row_json,
    is_error_row,
    read_inference_jsonl,
    repair_jsonl,
)

#: A shard spec ``i/n``.
_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
#: A shard's result file ``<task>.shard-<i>-of-<n>.jsonl``.
_FILE_RE = re.compile(r"^(?P<task>.+)\.shard-(?P<i>\d+)-of-(?P<n>\d+)\.jsonl$")
#: A shard's lock file ``.shard-<i>-of-<n>.lock``.
_LOCK_RE = re.compile(r"^\.shard-(\d+)-of-(\d+)\.lock$")


class ShardConflictError(AiplibError):
    """Two files hold different answers for the same stimulus, prompt and stimulus key."""


class WrongModelRowError(AiplibError):
    """A row of ``inference/<model>/<task>.jsonl`` names another model than its folder."""


class ShardBusyError(AiplibError):
    """A shard is still running (it holds its lock), or the same shard was started twice."""


def parse_shard(spec: str | None = None, env=None) -> tuple[int, int] | None:
    """The shard this process runs, ``(i, n)`` with ``0 <= i < n``, or None.

    ``spec`` is ``"i/n"`` (0-based); empty or None: Slurm's ``SLURM_ARRAY_TASK_ID`` −
    ``SLURM_ARRAY_TASK_MIN`` of ``SLURM_ARRAY_TASK_COUNT`` in ``env`` (default ``os.environ``) when
    set. Raises :class:`AiplibParameterError` unless the spec is ``i/n`` with ``0 <= i < n``.
    """
    env = os.environ if env is None else env
    if spec is not None and str(spec).strip():
        m = _SHARD_RE.match(str(spec))
        if not m:
            raise AiplibParameterError(f"shard must look like i/n (e.g. 0/4), got {spec!r}")
        i, n = int(m.group(1)), int(m.group(2))
    elif env.get("SLURM_ARRAY_TASK_ID") and env.get("SLURM_ARRAY_TASK_COUNT"):
        i = int(env["SLURM_ARRAY_TASK_ID"]) - int(env.get("SLURM_ARRAY_TASK_MIN") or 0)
        n = int(env["SLURM_ARRAY_TASK_COUNT"])
    else:
        return None
    if not 0 <= i < n:
        raise AiplibParameterError(f"shard {i}/{n}: the index must be in 0…{n - 1}")
    return (i, n)


def coerce_shard(shard=None, env=None) -> tuple[int, int] | None:
    """A stage-7 ``shard`` option as ``(i, n)`` or None: None or ``""`` → :func:`parse_shard`
    (Slurm), False → None, ``"i/n"`` or ``(i, n)``; :class:`AiplibParameterError` otherwise."""
    if shard is False:
        return None
    if shard is None or isinstance(shard, str):
        return parse_shard(shard, env=env)
    try:
        i, n = (int(x) for x in shard)
    except (TypeError, ValueError):
        raise AiplibParameterError(f"shard must be 'i/n' or (i, n), got {shard!r}") from None
    return parse_shard(f"{i}/{n}", env={})


def shard_label(shard: tuple[int, int] | None) -> str | None:
    """``(1, 4)`` → ``"1/4"`` (None stays None): the form written into run records."""
    return None if shard is None else f"{shard[0]}/{shard[1]}"


def shard_of(stimulus_id: str, n: int) -> int:
    """Shard of one stimulus among ``n``: SHA-256 of its id (UTF-8), first 8 bytes, modulo ``n``."""
    digest = hashlib.sha256(str(stimulus_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % int(n)


def select_shard(manifest, shard: tuple[int, int] | None):
    """Rows of ``manifest`` (DataFrame with an ``id`` column) in shard ``(i, n)``; all if None."""
    return (
        manifest
        if shard is None
        else manifest[[shard_of(s, shard[1]) == shard[0] for s in manifest["id"]]]
    )


def shard_path(result_file, shard: tuple[int, int] | None) -> Path:
    """``<task>.jsonl`` → ``<task>.shard-<i>-of-<n>.jsonl`` (unchanged when ``shard`` is None)."""
    p = Path(result_file)
    return p if shard is None else p.with_name(f"{p.stem}.shard-{shard[0]}-of-{shard[1]}.jsonl")


def shard_files(model_dir, *, run_logs: bool = False) -> dict[str, list[Path]]:
    """Shard files of one model's folder per task, sorted by shard (``run_logs=True``: the run logs
    only)."""
    out: dict[str, list] = {}
    for p in sorted(Path(model_dir).glob("*.shard-*-of-*.jsonl")):
        m = _FILE_RE.match(p.name)
        if m and (m.group("task") == "run_log") == run_logs:
            out.setdefault(m.group("task"), []).append((int(m.group("n")), int(m.group("i")), p))
    return {task: [p for *_, p in sorted(files)] for task, files in out.items()}


@contextlib.contextmanager
def shard_lock(model_dir, shard: tuple[int, int] | None):
    """Hold ``<model_dir>/.shard-<i>-of-<n>.lock`` (exclusive ``flock``, dropped by the kernel when
    the process ends; :func:`aiplib.core.lock.try_flock`) while a shard runs; no-op when ``shard``
    is None or without ``fcntl`` (Windows).

    Raises :class:`ShardBusyError` if another process holds it (the same shard started twice).
    """
    if shard is None or not LOCKING_SUPPORTED:
        yield None
        return
    path = Path(model_dir) / f".shard-{shard[0]}-of-{shard[1]}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(path)
    try:
        if not try_flock(fd):
            raise ShardBusyError(
                f"shard {shard_label(shard)} of {Path(model_dir).name} is already running "
                f"(another process holds {path})"
            )
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        yield path
    finally:
        os.close(fd)  # releases the lock


def busy_shards(model_dir) -> list[str]:
    """Shards (``"i/n"``) of one model whose lock another process holds right now."""
    busy = []
    if not LOCKING_SUPPORTED:
        return busy
    for p in sorted(Path(model_dir).glob(".shard-*-of-*.lock")):
        m = _LOCK_RE.match(p.name)
        if m is None:
            continue
        fd = os.open(p, os.O_RDWR)
        try:
            if not try_flock(fd):
                busy.append(f"{m.group(1)}/{m.group(2)}")
        finally:
            os.close(fd)
    return busy


def _append_synced(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path``, then flush and fsync."""
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def superseded_path(path) -> Path:
    """``superseded/<name>`` beside the inference file ``path``: where its stale rows are kept."""
    path = Path(path)
    return path.parent / "superseded" / path.name


def rewrite_jsonl(path: Path, content: bytes, moved: list[bytes]) -> Path:
    """Append the ``moved`` lines to ``superseded/<name>`` beside ``path`` (fsync'ed first), then
    replace ``path`` by ``content`` atomically (``.part``, fsync, rename); returns the side file."""
    side = superseded_path(path)
    if moved:
        side.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(side)
        _append_synced(side, b"".join(x if x.endswith(b"\n") else x + b"\n" for x in moved))
    write_bytes_atomic(path, content)
    return side


def parse_line(raw: bytes) -> tuple:
    """``(row, id)`` of one JSONL line; ``id`` None when it is not UTF-8 JSON of an object with an
    ``id``."""
    try:
        r = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, None
    return r, (str(r["id"]) if isinstance(r, dict) and r.get("id") not in (None, "") else None)


def _key(row: dict) -> tuple:
    return (str(row.get("id")), row.get("prompt_id"), row.get("stim_key"))


def merge_shards(result_file, shards=None) -> dict:
    """Append the rows of a task's shard files (default: every one beside it) to its result file.

    Identical duplicates are written once; error rows never conflict. A main row whose stimulus a
    shard answered under another ``stim_key`` moves to ``superseded/``; a shard row with a main
    row's key and answer but other fields (:func:`aiplib.inference.resume.refreshed_copies`)
    replaces it. Returns the counts (``rows_added``, ``duplicates_identical``, ``lines_skipped``,
    ``rows_superseded`` …).

    Raises
    ------
    ShardConflictError
        If two successful rows with the same ``(id, prompt_id, stim_key)`` differ in ``raw``.
        Nothing is written.
    """
    result_file = Path(result_file)
    if shards is None:
        shards = shard_files(result_file.parent).get(result_file.stem, [])
    shards = [Path(s) for s in shards]
    merge = _read_main_rows(result_file)
    for s in shards:
        _take_shard_file(merge, s)
    keep, move = _split_main_lines(result_file, _current_keys(merge.new_rows), merge.refresh)
    result_file.parent.mkdir(parents=True, exist_ok=True)
    new_lines = [inference_row_json(r) for r in merge.new_rows]
    if move or merge.refresh:
        rewrite_jsonl(result_file, b"".join(keep) + "".join(new_lines).encode("utf-8"), move)
    else:
        append_jsonl_lines(result_file, new_lines)
    _set_merged(shards, result_file.parent)
    return {
        "file": str(result_file),
        "shards": [str(s) for s in shards],
        "rows_added": len(merge.new_rows),
        "duplicates_identical": merge.identical,
        "lines_skipped": merge.skipped,
        "rows_superseded": len(move),
        "rows_refreshed": len(merge.refresh),
    }


@dataclass
class _Merge:
    """What :func:`merge_shards` has gathered so far for one result file."""

    result_file: Path
    #: key → (raw, file) of its first successful row
    seen: dict = field(default_factory=dict)
    #: key → the result file's successful row
    main_rows: dict = field(default_factory=dict)
    #: shard rows to append, in shard order
    new_rows: list = field(default_factory=list)
    #: shard rows equal in key and answer to a row already seen
    identical: int = 0
    #: key → a shard's refreshed copy of a result-file row
    refresh: dict = field(default_factory=dict)
    #: unreadable lines skipped in every file read
    skipped: int = 0


def _read_main_rows(result_file: Path) -> _Merge:
    """Start a merge from the result file's successful rows (repaired first when it exists)."""
    merge = _Merge(result_file)
    if not result_file.is_file():
        return merge
    repair_jsonl(result_file)
    rows, merge.skipped = read_inference_jsonl(result_file)
    for r in rows:
        if not is_error_row(r):
            merge.seen.setdefault(_key(r), (r.get("raw"), result_file))
            merge.main_rows[_key(r)] = r
    return merge


def _take_shard_file(merge: _Merge, shard: Path) -> None:
    """Add the rows of one shard file (repaired first) to ``merge``."""
    repair_jsonl(shard)
    rows, n_bad = read_inference_jsonl(shard)
    merge.skipped += n_bad
    for r in rows:
        _take_shard_row(merge, r, shard)


def _take_shard_row(merge: _Merge, r: dict, shard: Path) -> None:
    """A new row is appended; a duplicate is counted (and kept as a refresh when its fields differ
    from the result file's row); a different answer raises :class:`ShardConflictError`."""
    if is_error_row(r):
        merge.new_rows.append(r)
        return
    k = _key(r)
    if k not in merge.seen:
        merge.seen[k] = (r.get("raw"), shard)
        merge.new_rows.append(r)
        return
    raw, where = merge.seen[k]
    if raw != r.get("raw"):
        raise ShardConflictError(
            two_answers_message(k, (raw, where), (r.get("raw"), shard))
            + "; remove the wrong shard file and re-run it"
        )
    merge.identical += 1
    if where == merge.result_file and r != merge.main_rows[k] and k[2] is not None:
        # same answer, current manifest fields (aiplib.inference.resume.refreshed_copies)
        merge.refresh[k] = r


def two_answers_message(key: tuple, first: tuple, second: tuple) -> str:
    """``stimulus 'x' (prompt p) has two different answers: 'a' in A and 'b' in B``: ``key`` is
    ``(id, prompt_id, stim_key)``, ``first`` and ``second`` are ``(answer, where)``."""
    return (
        f"stimulus {key[0]!r} (prompt {key[1]}) has two different answers: {first[0]!r} in "
        f"{first[1]} and {second[0]!r} in {second[1]}"
    )


def one_answer_per_stimulus(path, model: str | None = None) -> int:
    """Check that the inference file ``path`` holds one answer per stimulus and only ``model``'s
    rows (stage 7 before it appends, stage 8 before it scores); returns how many successful rows
    repeat another one's key and answer (identical duplicates, read once).

    Two successful rows conflict when they share ``(id, prompt_id, stim_key)`` (the key
    :func:`merge_shards` uses) and differ in ``raw``; error rows never conflict. ``model``: the
    folder's model id; a row whose ``model`` field names another one (e.g. ``<task>.jsonl``, a
    symbolic link to another model's file) is refused. Unreadable lines are skipped (counted by the
    readers).

    Raises
    ------
    ShardConflictError
        On the first conflict, naming the file and both lines, with :func:`merge_shards`'s
        resolution (keep one answer and re-run stage 7).
    WrongModelRowError
        On the first row of another model, naming the file, the line and both models.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    seen: dict = {}
    identical = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            r, rid = parse_line(raw)
            if rid is None:
                continue
            _refuse_other_model(path, number, r, model)
            if is_error_row(r):
                continue
            k = _key(r)
            if k not in seen:
                seen[k] = (r.get("raw"), f"{path} line {number}")
            elif seen[k][0] != r.get("raw"):
                raise ShardConflictError(
                    two_answers_message(k, seen[k], (r.get("raw"), f"line {number}"))
                    + "; delete the wrong line (or move the file aside) and re-run stage 7, "
                    "which decodes the stimulus again"
                )
            else:
                identical += 1
    return identical


def _refuse_other_model(path: Path, number: int, row: dict, model: str | None) -> None:
    """Raise :class:`WrongModelRowError` when ``row`` (line ``number`` of ``path``) names a model
    other than ``model`` (no check when either is missing)."""
    named = row.get("model")
    if model is None or named in (None, "") or str(named) == model:
        return
    real = path.resolve()
    link = f" (a link to {real})" if real != path.absolute() else ""
    raise WrongModelRowError(
        f"{path}{link} line {number}: the row is an answer of model {named!r}, not of "
        f"{model!r} whose folder holds it; put each model's rows in its own folder "
        f"(inference/{named}/) and re-run stage 7 for {model!r}"
    )


def _current_keys(new_rows: list) -> dict:
    """``{stimulus id: stim_key}`` of each stimulus a shard answered: other-keyed main rows are
    stale."""
    current = {}
    for r in new_rows:
        if not is_error_row(r) and r.get("stim_key") is not None:
            current[str(r["id"])] = r["stim_key"]
    return current


def _is_stale(row, rid, current: dict) -> bool:
    """True for a successful result-file row whose stimulus a shard answered under another key."""
    if rid not in current or is_error_row(row):
        return False
    return row.get("stim_key") != current[rid]


def _split_main_lines(result_file: Path, current: dict, refresh: dict) -> tuple[list, list]:
    """The result file's lines as ``(keep, move)``: stale rows move to ``superseded/``, refreshed
    rows are kept as their shard copy; both empty when nothing is stale or refreshed."""
    keep, move = [], []
    if not (current or refresh) or not result_file.is_file():
        return keep, move
    with open(result_file, "rb") as f:
        for line in f:
            r, rid = parse_line(line)
            if _is_stale(r, rid, current):
                move.append(line)
                continue
            if rid is not None and not is_error_row(r) and _key(r) in refresh:
                line = inference_row_json(refresh[_key(r)]).encode("utf-8")
            keep.append(line)
    return keep, move


def merge_diagnostics(checks_dir) -> int:
    """Append the ``mix_diagnostics.shard-*`` rows of ``checks_dir`` to ``mix_diagnostics.csv`` (one
    per ``stimulus_id``; the files moved to ``merged-shards/``); returns the rows added."""
    checks_dir = Path(checks_dir)
    files = (
        sorted(checks_dir.glob("mix_diagnostics.shard-*-of-*.csv")) if checks_dir.is_dir() else []
    )
    if not files:
        return 0
    main = checks_dir / "mix_diagnostics.csv"

    def read(p):
        repair_jsonl(p)
        try:
            return pd.read_csv(p, dtype=str, keep_default_na=False)
        except (pd.errors.EmptyDataError, FileNotFoundError):
            return pd.DataFrame(columns=MIX_DIAG_FIELDS)

    have = set(read(main)["stimulus_id"]) if main.is_file() else set()
    new = pd.concat([read(p) for p in files], ignore_index=True)
    new = (
        new[~new["stimulus_id"].isin(have)]
        .drop_duplicates("stimulus_id")
        .reindex(columns=MIX_DIAG_FIELDS)
    )
    if len(new):
        header = not main.is_file() or main.stat().st_size == 0
        _append_synced(
            main, new.to_csv(header=header, index=False, lineterminator="\n").encode("utf-8")
        )
    _set_merged(files, checks_dir)
    return len(new)


def _set_merged(files, folder: Path) -> None:
    """Move merged shard files to ``<folder>/merged-shards/``."""
    for s in files:
        (folder / "merged-shards").mkdir(exist_ok=True)
        s.replace(folder / "merged-shards" / s.name)


def merge_model(model_dir, *, check_busy: bool = True) -> list[dict]:
    """Merge one model's shard files (rows per task, then the ``run_log.shard-*`` files appended to
    its ``run_log.jsonl``; each moved to ``merged-shards/``), removing its released locks; one
    :func:`merge_shards` result per task. Raises :class:`ShardBusyError` (``check_busy``) while a
    shard runs."""
    model_dir = Path(model_dir)
    tasks = shard_files(model_dir)
    if not tasks and not shard_files(model_dir, run_logs=True):
        return []
    if check_busy:
        _refuse_busy([model_dir])
    out = [merge_shards(model_dir / f"{task}.jsonl", files) for task, files in tasks.items()]
    for s in shard_files(model_dir, run_logs=True).get("run_log", []):  # appended to run_log.jsonl
        repair_jsonl(s)
        lines = [x for x in s.read_text(encoding="utf-8").splitlines(keepends=True) if x.strip()]
        repair_jsonl(model_dir / "run_log.jsonl")
        append_jsonl_lines(model_dir / "run_log.jsonl", lines)
        _set_merged([s], model_dir)
    for lock in model_dir.glob(".shard-*-of-*.lock"):  # none is held (checked): tidy up
        lock.unlink(missing_ok=True)
    return out


def _refuse_busy(model_dirs) -> None:
    """Raise :class:`ShardBusyError` naming every shard of ``model_dirs`` that still runs."""
    busy = []
    for d in model_dirs:
        busy.extend(f"{d.name} {b}" for b in busy_shards(d))
    if busy:
        raise ShardBusyError(
            f"shard(s) still running: {', '.join(busy)}; merge when every array task has finished"
        )


def is_shard_file(path) -> bool:
    """True for ``<task>.shard-<i>-of-<n>.jsonl`` (readers listing a model's tasks skip them)."""
    return _FILE_RE.match(Path(path).name) is not None


def merge_all(inference_dir, checks_dir=None) -> list[dict]:
    """Merge every model's shard files under ``inference_dir``, then the shards' mix diagnostics
    (``checks_dir``: default ``checks/`` or ``checks/<family>/`` beside ``inference/[<family>/]``).

    Returns one :func:`merge_shards` result per (model, task). Raises :class:`ShardBusyError` if any
    shard still runs (checked before anything moves), :class:`ShardConflictError` as
    :func:`merge_shards`.
    """
    inference_dir = Path(inference_dir)
    if not inference_dir.is_dir():
        return []
    todo = [
        d
        for d in sorted(p for p in inference_dir.iterdir() if p.is_dir())
        if shard_files(d) or shard_files(d, run_logs=True)
    ]
    _refuse_busy(todo)  # for every model before anything moves
    out = []
    for model_dir in todo:
        out.extend(merge_model(model_dir, check_busy=False))
    if checks_dir is None:
        checks_dir = _default_checks_dir(inference_dir)
    if checks_dir is not None:
        merge_diagnostics(checks_dir)
    return out


def _default_checks_dir(inference_dir: Path) -> Path | None:
    """``checks/`` beside ``inference/``, ``checks/<family>/`` for ``inference/<family>/``, else
    None."""
    if inference_dir.name == "inference":
        return inference_dir.parent / "checks"
    if inference_dir.parent.name == "inference":
        return inference_dir.parent.parent / "checks" / inference_dir.name
    return None


def main(argv=None) -> int:
    """``python -m aiplib.inference.shards INFERENCE_DIR``: merge every shard file below it; exit 1
    on a conflict."""

    ap = argparse.ArgumentParser(prog="python -m aiplib.inference.shards", description=main.__doc__)
    ap.add_argument("inference_dir")
    a = ap.parse_args(argv)
    try:
        res = merge_all(a.inference_dir)
    except (ShardConflictError, ShardBusyError) as exc:
        print(f"merge refused: {exc}")
        return 1
    print(summary_line(res, a.inference_dir))
    return 0


def summary_line(res: list[dict], where) -> str:
    """What :func:`merge_all` did, as lines for a log or a notebook (one per task merged)."""
    if not res:
        return f"no shard files to merge under {where}"
    lines = []
    for r in res:
        lines.append(
            f"merged {len(r['shards'])} shard(s) into {r['file']}: {r['rows_added']} rows added, "
            f"{r['duplicates_identical']} identical duplicates, "
            f"{r.get('rows_superseded', 0)} stale rows set aside, "
            f"{r['lines_skipped']} unreadable lines skipped"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
