"""Stage 7's resume rule: which manifest rows still need an answer, keyed on what the model heard.

Every inference row carries ``stim_key`` (:func:`stimulus_keys`): a hash of the manifest row's
content (ids, seed, background offset, SNR, files and their SHA-256), the prompt text and the
registry entry. A row whose key no longer matches (the stimulus, prompt or model changed) is moved
to ``<model>/superseded/<task>.jsonl`` before anything is decoded (:func:`set_aside_stale_rows`),
so no reader can take an old transcript for a changed stimulus, and the kept rows' copies of their
manifest row (reference text, label, a clean row's seed …, which the key does not cover) are brought
up to date; :func:`pending_stimuli` lists what is left. Rows written without a key (the authors' files, older versions) follow
:data:`UNKEYED_CHECK_FIELDS`. Used by :mod:`aiplib.inference.runner` and :mod:`aiplib.inference.shards`.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pandas as pd

from aiplib.core import stamps
from aiplib.inference import keys
from aiplib.inference.keys import STIM_KEY_FIELD, stimulus_base
from aiplib.inference.models import decoding_key
from aiplib.inference.prompts import NO_PROMPT_ID
from aiplib.inference.shards import select_shard, shard_path
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

__all__ = ["UNKEYED_CHECK_FIELDS", "pending_stimuli", "stimulus_keys", "set_aside_stale_rows", "resume_file",
           "refreshed_row", "refreshed_copies", "plan_family"]

log = logging.getLogger(__name__)


UNKEYED_CHECK_FIELDS = ("seed", "snr_db")
"""Manifest columns compared for a row written without a resume key (the authors' rows carry
them): a row whose value differs from the current manifest's is of another stimulus."""


def _same_value(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _check_fields(manifest: pd.DataFrame) -> dict:
    """``{id: {field: value}}`` of :data:`UNKEYED_CHECK_FIELDS` (fast: no full ``to_dict``)."""
    cols = [c for c in UNKEYED_CHECK_FIELDS if c in manifest.columns]
    vals = [manifest[c].tolist() for c in cols]
    return {i: dict(zip(cols, v)) for i, *v in zip(manifest["id"].tolist(), *vals)}


def _unkeyed_matches(row: dict, mrow: dict | None, prompt_id: str | None) -> bool:
    """A row without ``stim_key`` still answers the current stimulus: same (or no) ``prompt_id``
    and the same :data:`UNKEYED_CHECK_FIELDS` where the row has them."""
    if row.get("prompt_id") not in (None, prompt_id):
        return False
    if mrow is None:
        return True
    return all(_same_value(row[f], mrow.get(f)) for f in UNKEYED_CHECK_FIELDS
               if row.get(f) is not None and f in mrow)


def pending_stimuli(manifest: pd.DataFrame, path, prompt_id: str, *, keys: dict | None = None,
                    rerun_unkeyed: bool = False) -> pd.DataFrame:
    """Manifest rows still to decode.

    Parameters
    ----------
    manifest : pandas.DataFrame
        Rows of ``manifests/<family>.csv`` (at least ``id``).
    path : str or Path
        ``inference/<model>/<task>.jsonl``.
    prompt_id : str
        The current prompt's id.
    keys : dict of str → str, optional
        The current resume key of each stimulus id (:func:`stimulus_keys`). A successful row
        with a ``stim_key`` counts as done only when it equals ``keys[id]``. None: the rule of
        rows without a key for every row.
    rerun_unkeyed : bool
        Rows without ``stim_key`` (the authors' files, files of older versions) never count
        as done. By default they count when their ``prompt_id`` is the current one or absent
        and their ``seed`` and ``snr_db``, where present, equal the manifest's (their audio
        files cannot be checked).

    Returns
    -------
    pandas.DataFrame
        The rows of ``manifest`` without a successful row that answers them, in manifest order.
    """

    path = Path(path)
    done = set()
    if path.is_file():
        mrows = _check_fields(manifest)
        for r in read_inference_jsonl(path)[0]:
            if is_error_row(r):
                continue
            key = r.get(STIM_KEY_FIELD)
            if key is not None and keys is not None:
                if keys.get(r["id"]) == key:
                    done.add(r["id"])
            elif not rerun_unkeyed and _unkeyed_matches(r, mrows.get(r["id"]), prompt_id):
                done.add(r["id"])
    return manifest[~manifest["id"].isin(done)]


def stimulus_keys(ws, manifest: pd.DataFrame, *, prompt_text: str, entry, bases: dict | None = None,
                  decoding: dict | None = None) -> dict:
    """The resume key of every manifest row for one prompt and one model.

    Key = :func:`aiplib.inference.keys.stimulus_key` of the row's :func:`aiplib.inference.keys.stimulus_base`
    (``id, seed, bg_offset, snr_db, background_id, condition, speech_path, bg_path`` and the
    SHA-256 of the speech and background files; rows of the ``competing_speech`` and ``channel``
    condition families add their family columns, and the distractor table's SHA-256 or the
    external tool's version), the SHA-256 of ``prompt_text`` and
    :func:`aiplib.inference.keys.entry_sha256` of ``entry`` and, when given, the SHA-256 of ``decoding``:
    16 hex digits.

    Parameters
    ----------
    ws : Workspace
        Resolves the audio paths.
    manifest : pandas.DataFrame
    prompt_text : str
    entry : aiplib.inference.models.ModelEntry or dict
    bases : dict, optional
        ``{id: base}`` computed before (shared by the tasks of a family).
    decoding : dict, optional
        The output-deciding decoding options of the run (:func:`aiplib.inference.models.decoding_key`, e.g.
        the embedded Whisper's window policy ``{"windows_s": [15, 20, 30], "min_pad_s": 5.0}``);
        None for the backend's reference decoding (the key rows always had).

    Returns
    -------
    dict of str → str
        ``{stimulus id: key}``.
    """

    if bases is None:
        hashes: dict = {}
        bases = {r["id"]: keys.stimulus_base(r, ws, hashes) for r in manifest.to_dict("records")}
    p_sha, e_sha = stamps.text_sha256(prompt_text), keys.entry_sha256(entry)
    d_sha = stamps.json_sha256(decoding) if decoding else None
    return {i: keys.stimulus_key(b, prompt_sha256=p_sha, entry_sha256=e_sha, decoding_sha256=d_sha)
            for i, b in bases.items()}


def _differs(a, b) -> bool:
    """Two JSON values differ (``True`` is not ``1``; ``1`` is ``1.0``)."""
    return isinstance(a, bool) != isinstance(b, bool) or a != b


def refreshed_row(row: dict, mrow: dict) -> dict | None:
    """``row`` with its manifest copy brought up to date, or None when it already is.

    A successful inference row is its manifest row's columns followed by
    :data:`aiplib.io.formats.RUN_FIELDS` (:func:`aiplib.inference.runner.run_inference` writes
    ``{**manifest_row, raw, model, task, …}``). The refreshed row is what a run would write now
    for the same answer: every column of ``mrow`` (the current manifest row, values as stored,
    :func:`aiplib.io.formats.json_values`) first, in manifest order, then the row's other fields in
    their order with their values (``raw``, ``stim_key`` … are never changed; a field of neither,
    e.g. an old manifest column, is kept).

    Parameters
    ----------
    row : dict
        A row read back from ``inference/<model>/<task>.jsonl``.
    mrow : dict
        ``json_values`` of its current manifest row.
    """
    if all(k in row and not _differs(row[k], v) for k, v in mrow.items()):
        return None
    return {**mrow, **{k: v for k, v in row.items() if k not in mrow}}


def set_aside_stale_rows(path, manifest: pd.DataFrame, keys: dict, prompt_id: str, *,
                         rerun_unkeyed: bool = False, refresh: bool = True,
                         records: list | None = None) -> int:
    """Move the rows of ``path`` that no longer answer the current manifest to
    ``<model>/superseded/<task>.jsonl``, so no reader can take an old transcript for a changed
    stimulus; bring the manifest fields of the kept rows up to date.

    A row is moved when its ``id`` is not in ``manifest`` (an item or background that left), its
    ``stim_key`` differs from ``keys[id]`` (the stimulus, the prompt or the model changed), or —
    a successful row without a key — it fails the rule of :func:`pending_stimuli` (other seed or
    SNR, other prompt id; every one with ``rerun_unkeyed``). Error rows without a key stay (they
    are retried and never scored).

    A kept successful row with a key (ours) answers the same audio, but its copy of the manifest
    row can be old: the key covers what the model heard, not the reference ``transcript`` or
    ``keyword`` / ``is_target``, a clean row's ``seed``, ``bg_active``, ``accent_group``,
    ``duration_s`` … With ``refresh`` those fields are replaced by the current manifest row's
    (:func:`refreshed_row`; the response fields :data:`aiplib.io.formats.RUN_FIELDS` are untouched),
    so a reader of the file alone (``make score INFERENCE_DIR=…``) scores against the current
    references. Rows without a key (the authors' files) are not changed.

    The file is rewritten only when a line moves or a row is refreshed: atomically (a ``.part``
    file, fsync, rename), other lines byte for byte; moved lines are appended (and fsync'ed) to
    the superseded file first, so an interruption never loses a row. With nothing to do the file
    is only read.

    Parameters
    ----------
    path : str or Path
        ``inference/<model>/<task>.jsonl`` (or a shard's own file).
    manifest : pandas.DataFrame
        The whole current manifest of the family (not cut by ``limit``).
    keys : dict
        :func:`stimulus_keys` for this task and model.
    prompt_id : str
    rerun_unkeyed : bool
    refresh : bool
        Refresh the manifest fields of kept keyed rows (default True).
    records : list of dict, optional
        ``manifest.to_dict("records")`` when the caller has it (saves a conversion).

    Returns
    -------
    int
        Rows moved (the rows refreshed are logged, see :func:`resume_file`).
    """
    return resume_file(path, manifest, keys, prompt_id, rerun_unkeyed=rerun_unkeyed, refresh=refresh,
                       records=records)["moved"]


def resume_file(path, manifest: pd.DataFrame, keys: dict, prompt_id: str, *, rerun_unkeyed: bool = False,
                refresh: bool = True, records: list | None = None) -> dict:
    """:func:`set_aside_stale_rows`, returning ``{"moved": int, "refreshed": int, "quarantined": int}``
    (rows moved to ``superseded/``, kept rows whose manifest fields were brought up to date, and
    unreadable lines — not UTF-8, not JSON, not an object with an ``id`` — moved with their line
    number to ``quarantine/<task>.jsonl`` by :func:`aiplib.io.formats.quarantine_lines`; the stimulus
    such a line answered has no row left, so the same run decodes it again)."""

    path = Path(path)
    if not path.is_file():
        return {"moved": 0, "refreshed": 0, "quarantined": 0}
    mrows = _check_fields(manifest)
    full = None
    if refresh:
        recs = records if records is not None else manifest.to_dict("records")
        full = {r["id"]: r for r in recs}
    out, move, bad, n_new = [], [], [], 0
    with open(path, "rb") as f:
        lines = f.readlines()
    for number, raw in enumerate(lines, start=1):
        try:
            r = json.loads(raw.decode("utf-8"))
            rid = str(r["id"]) if isinstance(r, dict) and r.get("id") not in (None, "") else None
        except (UnicodeDecodeError, ValueError):
            rid = None
        if rid is None:  # not UTF-8 / JSON / a row: to quarantine/, its stimulus is decoded again
            if raw.strip():
                bad.append((number, raw))
            else:
                out.append(raw)
            continue
        key = r.get(STIM_KEY_FIELD)
        if rid not in mrows:
            stale = True
        elif key is not None:
            stale = key != keys.get(rid)
        elif is_error_row(r):
            stale = False
        else:
            stale = rerun_unkeyed or not _unkeyed_matches(r, mrows[rid], prompt_id)
        if stale:
            move.append(raw)
            continue
        if full is not None and key is not None and not is_error_row(r):
            new = refreshed_row(r, json_values(full[rid]))
            if new is not None:
                raw = inference_row_json(new).encode("utf-8")
                n_new += 1
        out.append(raw)
    if not move and not n_new and not bad:
        return {"moved": 0, "refreshed": 0, "quarantined": 0}
    if bad:  # kept aside (fsync'ed) before the file is rewritten without them
        side_q = quarantine_lines(path, bad)
    if move:
        side = path.parent / "superseded" / path.name
        side.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(side)
        with open(side, "ab") as f:
            f.write(b"".join(x if x.endswith(b"\n") else x + b"\n" for x in move))
            f.flush()
            os.fsync(f.fileno())
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:
        f.write(b"".join(out))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if move:
        log.warning("%s: %d row(s) answer stimuli, prompts or a model that changed (or left the manifest); "
                    "moved to %s and re-run", path, len(move), side)
    if n_new:
        log.warning("%s: %d kept row(s) brought up to date with the manifest (reference text, label, seed …; "
                    "answers unchanged)", path, n_new)
    if bad:
        log.warning("%s: %d unreadable line(s) (not UTF-8, not JSON or without an id; line %s) moved to %s; "
                    "their stimuli have no answer now and are decoded again", path, len(bad),
                    ", ".join(str(n) for n, _ in bad[:5]) + (" …" if len(bad) > 5 else ""), side_q)
    return {"moved": len(move), "refreshed": n_new, "quarantined": len(bad)}


def refreshed_copies(main_path, own_path, ids, keys: dict, records: list) -> list[dict]:
    """For a shard, which never rewrites ``<task>.jsonl``: the rows of ``main_path`` it would
    refresh, as new rows for its own file (``own_path``), so the merge can replace them.

    A successful keyed row of ``main_path`` whose ``id`` is in ``ids`` (the shard's stimuli),
    whose ``stim_key`` is current (``keys[id]``) and whose manifest copy is old
    (:func:`refreshed_row` of the manifest row in ``records``) gives its refreshed row, unless
    ``own_path`` already holds that very row (a shard run again adds nothing).
    :func:`aiplib.inference.shards.merge_shards` then puts it in place of the main file's row (same id,
    key and answer, other manifest fields).

    Returns
    -------
    list of dict
        Rows to append to ``own_path``, in ``main_path`` order.
    """

    main_path, own_path = Path(main_path), Path(own_path)
    if not main_path.is_file():
        return []
    ids = set(ids)
    full = {r["id"]: r for r in records if r["id"] in ids}
    have = set()
    if own_path.is_file():
        have = {json.dumps(r, sort_keys=True) for r in read_inference_jsonl(own_path)[0] if not is_error_row(r)}
    out = []
    for r in read_inference_jsonl(main_path)[0]:
        rid, key = r["id"], r.get(STIM_KEY_FIELD)
        if rid not in full or key is None or key != keys.get(rid) or is_error_row(r):
            continue
        new = refreshed_row(r, json_values(full[rid]))
        if new is not None and json.dumps(new, sort_keys=True) not in have:
            have.add(json.dumps(new, sort_keys=True))
            out.append(new)
    return out


def plan_family(ws, entry, family: str, tasks: list[str], plan, config) -> dict:
    """Before a model loads: the resume keys of one task family's stimuli, stale rows set aside, and
    what is left to decode per task.

    Parameters
    ----------
    ws : Workspace
    entry : aiplib.inference.models.ModelEntry
        With the batch size it decodes with.
    family : str
        Task family (``asr``, ``kws``): its manifest.
    tasks : list of str
        The family's tasks to plan.
    plan : aiplib.inference.plan.RunPlan
        Its prompt set and shard.
    config : aiplib.inference.plan.DecodingConfig
        Its ``limit``, ``rerun_unkeyed`` and ``path`` (whose :func:`aiplib.inference.models.decoding_key`
        enters the keys).

    Returns
    -------
    dict
        ``n_work`` (0: nothing to decode), ``result`` (per-task summary rows), and when the manifest
        exists ``manifest, m_sha, prompts, keys, todo, paths, refreshed``. With a shard ``(i, n)``:
        the stimuli (of the first ``limit``) whose id hashes to ``i``, less those with a current row
        in ``<task>.jsonl`` (read, never written) or in the shard's own file (repaired, its stale
        rows set aside, appended to); ``paths`` are then the shard files.
    """
    shard, limit, rerun_unkeyed, ps = plan.shard, config.limit, config.rerun_unkeyed, plan.prompt_set
    decoding = decoding_key(entry, config.path)
    main_paths = {t: ws.inference_jsonl(entry.id, t) for t in tasks}
    tasks = list(main_paths)
    paths = {t: shard_path(main_paths[t], shard) for t in tasks}
    try:
        manifest = read_manifest(ws, family)
    except FileNotFoundError as exc:
        log.warning("%s/%s: %s", entry.id, family, exc)
        return {"n_work": 0, "result": {t: {"status": "no_manifest", "error": str(exc), "file": str(paths[t])}
                                        for t in tasks}}
    m_sha = manifest_hash(ws, family)
    hashes: dict = {}
    records = manifest.to_dict("records")
    bases = {r["id"]: stimulus_base(r, ws, hashes) for r in records}
    # a model that takes no prompt is sent none: its rows say prompt_id "none", and its resume key
    # does not change with a prompt text it never hears
    prompts = {t: ps.prompt(t) if getattr(entry, "takes_prompt", True) else (NO_PROMPT_ID, "") for t in tasks}
    keys, todo, refreshed = {}, {}, {}
    head = manifest.head(int(limit)) if limit is not None else manifest
    head = select_shard(head, shard)
    for t in tasks:
        keys[t] = stimulus_keys(ws, manifest, prompt_text=prompts[t][1], entry=entry, bases=bases,
                                decoding=decoding)
        paths[t].parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(paths[t])  # the file this process appends to (a shard's own file when sharded)
        # stale rows are set aside in the file this process owns: a shard never rewrites <task>.jsonl,
        # which the other shards read at the same time (the merge supersedes its stale rows)
        # (kept rows get the manifest's current reference text, label, seed …: refreshed)
        refreshed[t] = resume_file(paths[t], manifest, keys[t], prompts[t][0], rerun_unkeyed=rerun_unkeyed,
                                   records=records)["refreshed"]
        pend = pending_stimuli(head, paths[t], prompts[t][0], keys=keys[t], rerun_unkeyed=rerun_unkeyed)
        if shard is not None:
            pend = pending_stimuli(pend, main_paths[t], prompts[t][0], keys=keys[t], rerun_unkeyed=rerun_unkeyed)
            # rows of <task>.jsonl it may not rewrite: refreshed copies go to its own file (the merge swaps them in)
            copies = refreshed_copies(main_paths[t], paths[t], head["id"], keys[t], records)
            append_jsonl_lines(paths[t], [inference_row_json(r) for r in copies])
            refreshed[t] += len(copies)
        todo[t] = set(pend["id"])
    result = {t: {"status": "done", "n_stimuli": len(head), "n_done_before": len(head), "n_run": 0,
                  "n_errors": 0, "seconds": 0.0, "stimuli_per_s": None, "manifest_sha256": m_sha,
                  "error": None, "file": str(paths[t])} for t in tasks}
    return {"n_work": sum(len(v) for v in todo.values()), "result": result, "manifest": head, "refreshed": refreshed,
            "m_sha": m_sha, "prompts": prompts, "keys": keys, "todo": todo, "paths": paths}
