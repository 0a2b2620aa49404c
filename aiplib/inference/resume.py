"""Stage 7's resume rule: which manifest rows still need an answer, keyed on what the model heard.

Before a model loads, rows set aside earlier whose ``stim_key`` matches again come back from
``<model>/superseded/<task>.jsonl`` (:func:`restore_superseded`), rows whose ``stim_key``
(:func:`stimulus_keys`) no longer matches move there, and the kept rows' copies of their manifest
row are brought up to date (:func:`resume_file`); :func:`pending_stimuli` lists what is left. Rows
without a key (the authors' files) follow :data:`UNKEYED_CHECK_FIELDS`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from aiplib.core import stamps
from aiplib.core.atomic import write_bytes_atomic
from aiplib.inference import keys
from aiplib.inference.keys import STIM_KEY_FIELD, stimulus_base
from aiplib.inference.models import decoding_key
from aiplib.inference.plan import stratified_sample
from aiplib.inference.prompts import NO_PROMPT_ID
from aiplib.inference.shards import (
    one_answer_per_stimulus,
    parse_line,
    rewrite_jsonl,
    select_shard,
    shard_path,
    superseded_path,
)
from aiplib.io.formats import (
    append_jsonl_lines,
    inference_row_json,
    is_error_row,
    json_values,
    quarantine_lines,
    read_inference_jsonl,
    repair_jsonl,
)
from aiplib.stimuli.manifests import manifest_hash, read_manifest

log = logging.getLogger(__name__)


#: Manifest columns compared for a row without a resume key.
UNKEYED_CHECK_FIELDS = ("seed", "snr_db")
#: The counts of :func:`resume_file` when nothing changes.
_NOTHING_CHANGED = {"moved": 0, "refreshed": 0, "quarantined": 0}


def _same_value(a, b) -> bool:
    """Two manifest values are equal, as numbers when both are numbers, else as text."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _rows(path) -> list[dict]:
    """The rows of an inference JSONL file (:func:`aiplib.io.formats.read_inference_jsonl`); none if
    it is absent."""
    return read_inference_jsonl(path)[0] if Path(path).is_file() else []


def _check_fields(manifest: pd.DataFrame) -> dict:
    """``{id: {field: value}}`` of :data:`UNKEYED_CHECK_FIELDS`."""
    cols = [c for c in UNKEYED_CHECK_FIELDS if c in manifest.columns]
    vals = [manifest[c].tolist() for c in cols]
    return {i: dict(zip(cols, v)) for i, *v in zip(manifest["id"].tolist(), *vals)}


def _unkeyed_matches(row: dict, mrow: dict | None, prompt_id: str | None) -> bool:
    """A row without ``stim_key`` answers the current stimulus: same (or no) ``prompt_id`` and the
    same :data:`UNKEYED_CHECK_FIELDS` where the row has them."""
    return row.get("prompt_id") in (None, prompt_id) and (
        mrow is None
        or all(
            _same_value(row[f], mrow.get(f))
            for f in UNKEYED_CHECK_FIELDS
            if row.get(f) is not None and f in mrow
        )
    )


def pending_stimuli(
    manifest: pd.DataFrame, path, prompt_id: str, keys: dict, rerun_unkeyed: bool
) -> pd.DataFrame:
    """Rows of ``manifest`` still to decode into ``path`` (``inference/<model>/<task>.jsonl``), in
    manifest order.

    A keyed row is done when its key equals ``keys[id]``; a row without ``stim_key`` when it passes
    :func:`_unkeyed_matches`, unless ``rerun_unkeyed``.
    """
    mrows = _check_fields(manifest)
    done = set()
    for r in _rows(path):
        if is_error_row(r):
            continue
        if r.get(STIM_KEY_FIELD) is not None:
            current = keys.get(r["id"]) == r[STIM_KEY_FIELD]
        else:
            current = not rerun_unkeyed and _unkeyed_matches(r, mrows.get(r["id"]), prompt_id)
        if current:
            done.add(r["id"])
    return manifest[~manifest["id"].isin(done)]


def stimulus_keys(bases: dict, *, prompt_text: str, entry, decoding: dict | None) -> dict:
    """``{stimulus id: resume key}`` for one prompt and one model
    (:func:`aiplib.inference.keys.stimulus_key` of each stimulus's base in ``bases``, the prompt
    text, the entry and ``decoding``)."""
    p_sha = stamps.text_sha256(prompt_text)
    e_sha = keys.entry_sha256(entry)
    d_sha = stamps.json_sha256(decoding) if decoding else None
    return {
        i: keys.stimulus_key(b, prompt_sha256=p_sha, entry_sha256=e_sha, decoding_sha256=d_sha)
        for i, b in bases.items()
    }


def _differs(a, b) -> bool:
    """Two JSON values differ (``True`` is not ``1``; ``1`` is ``1.0``)."""
    return isinstance(a, bool) != isinstance(b, bool) or a != b


def refreshed_row(row: dict, mrow: dict) -> dict | None:
    """``row`` as a run would write it now for the same answer, or None when it already is: every
    column of ``mrow`` (the current manifest row, :func:`aiplib.io.formats.json_values`) in manifest
    order, then the row's other fields (``raw``, ``stim_key`` …; an old manifest column is kept)."""
    if all(k in row and not _differs(row[k], v) for k, v in mrow.items()):
        return None
    return {**mrow, **{k: v for k, v in row.items() if k not in mrow}}


def resume_file(
    path, manifest: pd.DataFrame, keys: dict, prompt_id: str, rerun_unkeyed: bool, records: list
) -> dict:
    """Set aside the rows of ``path`` that no longer answer the current manifest; refresh the kept
    ones.

    A row moves to ``superseded/<task>.jsonl`` when its ``id`` left the manifest, its ``stim_key``
    differs from ``keys[id]``, or (a successful row without a key) it fails
    :func:`pending_stimuli`'s rule. Kept keyed rows get the current manifest fields of ``records``
    (:func:`refreshed_row`). Unreadable lines move to ``quarantine/<task>.jsonl``. The file is
    rewritten atomically, only when something changes. Returns the ``{"moved", "refreshed",
    "quarantined"}`` row counts.
    """
    path = Path(path)
    if not path.is_file():
        return dict(_NOTHING_CHANGED)
    rule = _KeepRule(_check_fields(manifest), keys, prompt_id, rerun_unkeyed)
    full = {r["id"]: r for r in records}
    out = []
    move = []
    bad = []
    n_new = 0
    with open(path, "rb") as f:
        lines = f.readlines()
    for number, raw in enumerate(lines, start=1):
        r, rid = parse_line(raw)
        if rid is None:  # not UTF-8 / JSON / a row: to quarantine/, its stimulus is decoded again
            if raw.strip():
                bad.append((number, raw))
            else:
                out.append(raw)
            continue
        if rule.is_stale(r, rid):
            move.append(raw)
            continue
        new = _refreshed_line(r, rid, full)
        if new is not None:
            raw = new
            n_new += 1
        out.append(raw)
    if not move and not n_new and not bad:
        return dict(_NOTHING_CHANGED)
    side_q = None
    if bad:  # kept aside (fsync'ed) before the file is rewritten without them
        side_q = quarantine_lines(path, bad)
    side = rewrite_jsonl(path, b"".join(out), move)
    _log_resumed(path, move, n_new, side)
    if bad:
        _log_quarantined(path, bad, side_q)
    return {"moved": len(move), "refreshed": n_new, "quarantined": len(bad)}


def _answered_keys(path: Path) -> set:
    """``(id, stim_key)`` of the successful keyed rows of ``path``."""
    answered = set()
    for r in _rows(path):
        if not is_error_row(r) and r.get(STIM_KEY_FIELD) is not None:
            answered.add((r["id"], r[STIM_KEY_FIELD]))
    return answered


def restore_superseded(path, keys: dict, answered_elsewhere=None) -> int:
    """Bring back to ``path`` the rows set aside in ``superseded/<name>`` that answer the current
    stimuli again; returns how many came back.

    A row comes back when it is a successful keyed row whose ``stim_key`` equals ``keys[id]`` and
    neither ``path`` nor ``answered_elsewhere`` (a shard's ``<task>.jsonl``, which it reads but
    never rewrites) holds a successful row with that id and key: the stimulus, prompt, model entry
    and decoding are exactly those it answered (e.g. a models file that changed and changed back,
    or a run that set rows aside, then stopped at loading the model). The last such line of each id
    is appended to ``path`` (fsync'ed), then the side file is rewritten atomically without the
    restored lines (other set-aside copies stay). Call it after
    :func:`aiplib.io.formats.repair_jsonl` of ``path`` and before :func:`resume_file`, which then
    brings the restored rows' manifest fields up to date.
    """
    path = Path(path)
    side = superseded_path(path)
    if not side.is_file():
        return 0
    answered = _answered_keys(path)
    if answered_elsewhere is not None:
        answered |= _answered_keys(Path(answered_elsewhere))
    with open(side, "rb") as f:
        lines = f.readlines()
    chosen = {}  # id -> index of its last matching line
    for number, raw in enumerate(lines):
        r, rid = parse_line(raw)
        if rid is None or is_error_row(r):
            continue
        key = r.get(STIM_KEY_FIELD)
        if key is None or key != keys.get(rid) or (rid, key) in answered:
            continue
        chosen[rid] = number
    if not chosen:
        return 0
    restored_lines = set(chosen.values())
    back = []
    for number in sorted(restored_lines):
        text = lines[number].decode("utf-8")
        if not text.endswith("\n"):
            text += "\n"
        back.append(text)
    left = [raw for number, raw in enumerate(lines) if number not in restored_lines]
    append_jsonl_lines(path, back)
    write_bytes_atomic(side, b"".join(left))
    log.warning(
        "%s: %d row(s) set aside earlier answer the current stimuli, prompt, model and decoding "
        "again; brought back from %s, not decoded again",
        path,
        len(chosen),
        side,
    )
    return len(chosen)


@dataclass(frozen=True)
class _KeepRule:
    """Which rows of an inference file still answer the current manifest (:func:`resume_file`)."""

    mrows: dict
    keys: dict
    prompt_id: str
    rerun_unkeyed: bool

    def is_stale(self, r: dict, rid: str) -> bool:
        """The row left the manifest, has another key, or is an unkeyed answer failing the
        rule."""
        if rid not in self.mrows:
            return True
        key = r.get(STIM_KEY_FIELD)
        if key is not None:
            return key != self.keys.get(rid)
        if is_error_row(r):
            return False
        return self.rerun_unkeyed or not _unkeyed_matches(r, self.mrows[rid], self.prompt_id)


def _refreshed_line(r: dict, rid: str, full: dict) -> bytes | None:
    """A kept keyed answer's line with the current manifest fields, or None when it is up to
    date."""
    if r.get(STIM_KEY_FIELD) is None or is_error_row(r):
        return None
    new = refreshed_row(r, json_values(full[rid]))
    if new is None:
        return None
    return inference_row_json(new).encode("utf-8")


def _log_resumed(path: Path, move: list, n_new: int, side) -> None:
    """Warn about the rows set aside and the rows refreshed."""
    if move:
        log.warning(
            "%s: %d row(s) answer stimuli, prompts or a model that changed (or left the manifest); "
            "moved to %s and re-run",
            path,
            len(move),
            side,
        )
    if n_new:
        log.warning(
            "%s: %d kept row(s) brought up to date with the manifest (reference text, label, "
            "seed …; answers unchanged)",
            path,
            n_new,
        )


def _log_quarantined(path: Path, bad: list, side_q) -> None:
    """Warn about the unreadable lines moved to ``quarantine/``."""
    first = ", ".join(str(n) for n, _ in bad[:5])
    if len(bad) > 5:
        first += " …"
    log.warning(
        "%s: %d unreadable line(s) (not UTF-8, not JSON or without an id; line %s) moved to %s; "
        "their stimuli have no answer now and are decoded again",
        path,
        len(bad),
        first,
        side_q,
    )


def refreshed_copies(main_path, own_path, ids, keys: dict, records: list) -> list[dict]:
    """For a shard, which never rewrites ``<task>.jsonl``: the :func:`refreshed_row` of each current
    keyed row of ``main_path`` for a stimulus in ``ids`` not yet in ``own_path``
    (:func:`aiplib.inference.shards.merge_shards` puts them in place)."""
    ids = set(ids)
    full = {r["id"]: r for r in records if r["id"] in ids}
    have = {json.dumps(r, sort_keys=True) for r in _rows(own_path) if not is_error_row(r)}
    out = []
    # keys holds every manifest id: a row of another key (or none) is not current
    for r in _rows(main_path):
        if r["id"] not in full or r.get(STIM_KEY_FIELD) != keys[r["id"]] or is_error_row(r):
            continue
        new = refreshed_row(r, json_values(full[r["id"]]))
        if new is None:
            continue
        line = json.dumps(new, sort_keys=True)
        if line not in have:
            have.add(line)
            out.append(new)
    return out


def plan_family(ws, entry, family: str, tasks: list[str], plan, config) -> dict:
    """Before a model loads: one task family's resume keys, stale rows set aside, and what is left
    to decode.

    Returns ``n_work`` (0: nothing to decode), ``result`` (per-task summary rows), and when the
    manifest exists ``manifest, m_sha, prompts, keys, todo, paths, refreshed``. A shard ``(i, n)``
    keeps the stimuli whose id hashes to ``i``, less those with a current row in ``<task>.jsonl``
    (read, never written) or in its own files (``paths``).
    """
    shard = plan.shard
    main_paths = {t: ws.inference_jsonl(entry.id, t) for t in tasks}
    paths = {t: shard_path(main_paths[t], shard) for t in tasks}
    try:
        manifest = read_manifest(ws, family)
    except FileNotFoundError as exc:
        log.warning("%s/%s: %s", entry.id, family, exc)
        return {"n_work": 0, "result": _no_manifest_result(tasks, paths, exc)}
    m_sha = manifest_hash(ws, family)
    records = manifest.to_dict("records")
    hashes: dict = {}
    bases = {r["id"]: stimulus_base(r, ws, hashes) for r in records}
    prompts = {t: _task_prompt(plan, entry, t) for t in tasks}
    # a limit decodes a stratified, seeded sample (plan.stratified_sample), not the first rows
    head = select_shard(stratified_sample(manifest, config.limit), shard)
    task_work = _TaskWork(
        manifest=manifest,
        head=head,
        records=records,
        shard=shard,
        rerun_unkeyed=config.rerun_unkeyed,
    )
    decoding = decoding_key(entry, config.path)
    keys = {}
    todo = {}
    refreshed = {}
    for t in tasks:
        keys[t] = stimulus_keys(bases, prompt_text=prompts[t][1], entry=entry, decoding=decoding)
        todo[t], refreshed[t] = task_work.pending(main_paths[t], paths[t], prompts[t][0], keys[t])
    result = {t: _up_to_date_result(len(head), m_sha, paths[t]) for t in tasks}
    return {
        "n_work": sum(len(v) for v in todo.values()),
        "result": result,
        "manifest": head,
        "refreshed": refreshed,
        "m_sha": m_sha,
        "prompts": prompts,
        "keys": keys,
        "todo": todo,
        "paths": paths,
    }


def _no_manifest_result(tasks: list[str], paths: dict, exc: Exception) -> dict:
    """The summary rows of a family whose manifest is missing."""
    return {t: {"status": "no_manifest", "error": str(exc), "file": str(paths[t])} for t in tasks}


def _task_prompt(plan, entry, task: str) -> tuple[str, str]:
    """``(prompt_id, text)`` sent for ``task``: a model that takes no prompt is sent none (its rows
    say prompt_id "none", and its resume key does not change with a prompt text it never hears)."""
    if getattr(entry, "takes_prompt", True):
        return plan.prompt_set.prompt(task)
    return (NO_PROMPT_ID, "")


def _up_to_date_result(n_stimuli: int, m_sha: str, path) -> dict:
    """A task's summary row before anything is decoded (all of it up to date)."""
    return {
        "status": "done",
        "n_stimuli": n_stimuli,
        "n_done_before": n_stimuli,
        "n_run": 0,
        "n_errors": 0,
        "seconds": 0.0,
        "stimuli_per_s": None,
        "manifest_sha256": m_sha,
        "error": None,
        "file": str(path),
    }


@dataclass(frozen=True)
class _TaskWork:
    """One family's manifest (``head``: the rows this run covers) and how stale rows are judged."""

    manifest: pd.DataFrame
    head: pd.DataFrame
    records: list
    shard: tuple | None
    rerun_unkeyed: bool

    def pending(self, main_path, path, prompt_id: str, keys: dict) -> tuple[set, int]:
        """Set stale rows aside and refresh kept ones in the file this process owns (``path``);
        the ids still to decode and the rows refreshed."""
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(path)  # the file this process appends to (a shard's own file when sharded)
        # rows set aside earlier that answer the current keys again come back first, so that
        # resume_file refreshes their manifest fields with the kept ones
        main_answers = None
        if self.shard is not None:
            main_answers = main_path
        restore_superseded(path, keys, main_answers)
        # stale rows are set aside in the file this process owns: a shard never rewrites
        # <task>.jsonl, which the other shards read at the same time (the merge supersedes its stale
        # rows) (kept rows get the manifest's current reference text, label, seed …: refreshed)
        refreshed = resume_file(
            path, self.manifest, keys, prompt_id, self.rerun_unkeyed, self.records
        )["refreshed"]
        # the rows kept must give one answer per stimulus (else: refused, file and lines named)
        one_answer_per_stimulus(path)
        pend = pending_stimuli(self.head, path, prompt_id, keys, self.rerun_unkeyed)
        if self.shard is not None:
            one_answer_per_stimulus(main_path)
            pend = pending_stimuli(pend, main_path, prompt_id, keys, self.rerun_unkeyed)
            # rows of <task>.jsonl it may not rewrite: refreshed copies go to its own file (the
            # merge swaps them in)
            copies = refreshed_copies(main_path, path, self.head["id"], keys, self.records)
            append_jsonl_lines(path, [inference_row_json(r) for r in copies])
            refreshed += len(copies)
        return set(pend["id"]), refreshed
