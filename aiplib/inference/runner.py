"""Stage 7: run every (model, task) over its manifest, resumably, one JSONL row per stimulus.

Files (``ws`` = the workspace)
------------------------------
``inference/<model>/<task>.jsonl``
    Append-only; one JSON object per line, in the authors' format (IvLabs/AIP-Speech
    ``scripts/05_inference.py``): every manifest column of the stimulus (``id, speech_id,
    background_id, snr_db, condition, seed, speech_path, bg_path`` …), then ``raw`` (the model's
    output), ``model``, ``task``; then ours: :data:`aiplib.io.formats.EXTRA_FIELDS` (``prompt_id, decode_s,
    audio_s, stim_key, batch_size, window_s`` — ``batch_size`` the number of stimuli in the ``generate``
    call that decoded the row, 1 when a failing batch was retried item by item). A failed generation is ``{id, raw: "__ERROR__", error, model, task}`` plus the
    same extras; the next run retries it and appends a new row. Readers take the last successful
    row per ``id`` (:func:`aiplib.io.formats.read_results`). Every reader goes through :func:`aiplib.io.formats.read_inference_jsonl`;
    the format (reader and writer) lives in :mod:`aiplib.io.formats`, re-exported here.
``inference/<model>/run_log.jsonl``
    One object per run (or failed load): decoding path, window, model info (weights, revision or
    sha256), package versions, start / end, counts, seconds; per task ``seconds`` (its share of
    the family loop, see :func:`_run_family`) and ``decode_seconds``; ``throughput`` (stimuli,
    decodes, audio s, loop s, stimuli/s, RTFx; per family too).
``checks/mix_diagnostics.csv``
    One row per stimulus materialised (achieved SNR, speech LUFS, peak, clip scale …), appended
    as the run goes, never duplicated.

Resuming
--------
A re-run decodes only the stimuli without a successful row for the current prompt and stimulus
(:mod:`aiplib.inference.resume`); kept rows get the current manifest's reference text, label and seed. A process
killed mid-write can leave a half line at the end of a file; it is cut back to the last complete
line (keeping every complete row) before anything is appended. Rows are flushed and fsync'ed
after every batch, so a kill loses at most the batch being decoded.

Shards (many GPUs or nodes)
---------------------------
``run_inference(..., shard="i/n")`` (or Slurm's ``SLURM_ARRAY_TASK_ID``/``COUNT`` when set) runs
only the pending stimuli whose id hashes to shard ``i`` of ``n`` (:mod:`aiplib.inference.shards`) and
writes to files of its own: ``<task>.shard-<i>-of-<n>.jsonl``, ``run_log.shard-<i>-of-<n>.jsonl``,
``checks/mix_diagnostics.shard-<i>-of-<n>.csv``. A row of ``<task>.jsonl`` or of the shard's own
file with the current key counts as done, so a killed shard resumes alone. A shard never rewrites
``<task>.jsonl`` (other shards read it at the same time): stale rows there are set aside by an
unsharded run or by the merge (:func:`aiplib.inference.shards.merge_shards`, ``make merge``, stage 8);
stale rows of its own shard file it sets aside itself. An unsharded run first merges the shard
files it finds (:func:`aiplib.inference.shards.merge_model`) and refuses to start while a shard of the same
model runs.

Order of work
-------------
Per model, the tasks of one family (``asr`` and ``asr_steer_p5``; ``kws`` and ``kws_steer_p5``)
run together: each batch of stimuli is materialised once and decoded with every prompt still
needing it, so a backend can reuse its audio encoding (the faster-whisper fast path does).
The next batch is mixed in a background thread while the current one is decoded.

Stimuli are never stored as audio: each is rebuilt from its manifest row by
:func:`aiplib.stimuli.families.materialize` (bit-identical every time) and cut to the model's
``max_audio_s`` (30 s).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError, ModelUnavailableError
from aiplib.core.progress import Progress, note
from aiplib.core.tasks import parse_suite
from aiplib.inference import models
from aiplib.inference.batch_decode import generate_into, mix_batch, output_row
from aiplib.inference.models import decoding_key, resolve
from aiplib.inference.prompts import NO_PROMPT_ID, TASKS, get_prompt_set, not_applicable, prompt_set_record, task_names
from aiplib.inference.resume import plan_family
from aiplib.inference.run_records import MixDiagnostics, Throughput
from aiplib.inference.run_records import log_run as _log_run
from aiplib.inference.run_records import now_iso as _now
from aiplib.inference.run_records import short_error as _short
from aiplib.inference.run_records import versions as _versions
from aiplib.inference.shards import (
    coerce_shard,
    merge_model,
    shard_label,
    shard_lock,
    shard_path,
    summary_line,
)
from aiplib.io.audio import SR
from aiplib.io.formats import ERROR_RESPONSE, append_jsonl_lines, inference_row_json

__all__ = ["run_inference", "run_suite", "result_path", "raise_if_not_run", "not_applicable", "NO_PROMPT_ID", "DEFAULT_DECODING",
           "STAGE7_TIMES_COLUMNS"]

DEFAULT_DECODING = "window"
"""Stage 7's decoding of the embedded Whisper (:mod:`aiplib.inference.models.whisper`): ``window`` (the shortest
of 15 / 20 / 30 s leaving 5 s of padding). ``benchmarks/bench_window.py`` chose it over ``fast`` (30 s)
by its rule: the clean-WER interval window − 30 s includes 0 and the per-background ΔWER ranking
agrees (r_s >= 0.9), at 0.34–0.37 of the time (``docs/BENCHMARKS.md``)."""


log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------ file helpers
def result_path(ws, model: str, task: str) -> Path:
    """``<ws>/inference/<model>/<task>.jsonl`` (:meth:`aiplib.core.workspace.Workspace.inference_jsonl`)."""
    return ws.inference_jsonl(model, task)


# ------------------------------------------------------------------------------------------ the runner
def run_inference(ws, *, models="whisper_tiny_en", tasks="all", decoding: str = DEFAULT_DECODING,
                  batch_size: int | None = None, limit: int | None = None,
                  progress: bool = True, prompt_set=None, rerun_unkeyed: bool = False,
                  shard=None) -> pd.DataFrame:
    """Decode every stimulus of every task with every model, resuming where a run stopped.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Needs ``manifests/<family>.csv`` (stage 5) and the files they point to.
    models : str or list of str
        Registry ids, comma-separated ids, or ``"all"`` (every entry that can run here), see
        :func:`aiplib.inference.models.resolve`.
    tasks : str or list of str
        ``"all"`` or names from :data:`aiplib.inference.prompts.TASKS`.
    decoding : {"window", "fast", "standard"}
        Decoding path of faster-whisper models (other backends ignore it,
        :mod:`aiplib.inference.models.whisper`; default :data:`DEFAULT_DECODING`, ``window``): ``fast`` encodes each stimulus once for all prompts on
        Whisper's 30 s window, ``window`` does the same on the shortest of 15 / 20 / 30 s that
        leaves 5 s of padding, ``standard`` is faster-whisper's own ``transcribe`` (30 s, the
        same transcripts as ``fast``). The window policy enters the resume key (rows of another
        window are set aside and re-run) and each row records its ``window_s``.
    batch_size : int > 0, optional
        Stimuli per ``generate`` call; default the entry's ``batch_size``.
    prompt_set : str or aiplib.inference.prompts.PromptSet, optional
        The prompt set (default: the profile's — ``paper`` reads the authors' ``PROMPTS`` dict,
        ``demo``/``custom`` the built-in ``aip-closed-v1``); its name is written into every row
        (``prompt_set``) and its record (texts, source, SHA-256) into ``run_log.jsonl``.
    limit : int > 0, optional
        Keep only the first ``limit`` manifest rows per task (smoke runs).
    progress : bool
        Show progress per (model, task family), in stimuli per second: a tqdm bar, or plain
        ``[progress]`` lines under ``make`` (:mod:`aiplib.core.progress`); then one throughput line per
        model (stimuli/s, RTFx), also written to ``run_log.jsonl`` (``throughput``).
    rerun_unkeyed : bool
        Re-run the stimuli whose rows carry no resume key (``stim_key``: the authors' files,
        files of older versions); by default such a row counts as done when its prompt id, seed
        and SNR agree with the current manifest (see :func:`aiplib.inference.resume.pending_stimuli`).
    shard : str or (int, int) or None or False
        Run one shard of the pending stimuli: ``"i/n"`` or ``(i, n)`` (0-based ``i``), the
        stimuli whose id hashes to ``i`` (:func:`aiplib.inference.shards.shard_of`), written to
        ``<task>.shard-<i>-of-<n>.jsonl`` (see "Shards" in the module doc). None (default) or
        ``""``: Slurm's ``SLURM_ARRAY_TASK_ID``/``SLURM_ARRAY_TASK_COUNT`` when set, else every
        stimulus; False: every stimulus, whatever the environment. Merge with
        :func:`aiplib.inference.shards.merge_all` (``make merge``; stage 8 does it first).

    Returns
    -------
    pandas.DataFrame
        One row per (model, task): ``model, task, status, n_stimuli, n_done_before, n_run,
        n_errors, seconds, stimuli_per_s, file``. ``status`` is ``done``, ``unavailable`` (the
        model did not load; reason in ``error`` and in ``run_log.jsonl``), ``no_manifest`` or
        ``not_applicable`` (a prompt variant for a model that takes no prompt, :func:`not_applicable`).
        ``seconds`` is the task's share of the wall time of its family's loop (prompts decoded on
        the same stimuli share it evenly), so a model's tasks add up to its decoding time;
        ``stimuli_per_s = n_run / seconds``.

    Raises
    ------
    KeyError
        Unknown model id or task name (message lists the valid ones).
    AiplibParameterError
        If ``limit`` or ``batch_size`` is not a positive integer, or ``shard`` is not ``i/n``.
    aiplib.inference.shards.ShardBusyError
        If another process runs the same shard of a model (it holds the shard's lock).

    Notes
    -----
    A model that fails to load is logged and skipped; the stage goes on with the next model. A
    failing stimulus (unreadable audio, a backend error) becomes an ``__ERROR__`` row and is
    retried by the next run. Each model is closed before the next one loads.

    Resume is per stimulus and content-keyed: every row carries ``stim_key``
    (:func:`aiplib.inference.resume.stimulus_keys`: the manifest row's seed, offset, SNR, file paths and the SHA-256 of
    its audio files, the prompt text's SHA-256 and the registry entry's). Before a model loads,
    rows whose key no longer matches (a changed seed, SNR, item or background file, prompt or
    entry) are moved to ``inference/<model>/superseded/<task>.jsonl`` (:func:`aiplib.inference.resume.set_aside_stale_rows`)
    and their stimuli re-run; unchanged rows are kept, with their copy of the manifest row (reference
    text, KWS label, a clean row's seed …, which the key does not cover) brought up to date in one
    atomic rewrite when it differs (:func:`aiplib.inference.resume.resume_file`; a shard writes refreshed copies
    to its own file instead, swapped in by the merge). A model with nothing left to do is not
    loaded (its ``run_log.jsonl`` gets an ``up_to_date`` event) and, with ``progress``, each family
    with nothing to decode prints one line (``[progress] stage 7 <model> <tasks>: 0 to decode, N up
    to date``).
    """

    shard = coerce_shard(shard)

    for name, v in (("limit", limit), ("batch_size", batch_size)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0):
            raise AiplibParameterError(f"{name} must be a positive integer or None, got {v!r}")

    # resolved before any model loads: a paper run without its prompts file fails at once
    ps = get_prompt_set(prompt_set if prompt_set is not None else getattr(ws, "profile", None), ws=ws)
    ps_record = prompt_set_record(ps)
    entries = resolve(models)
    task_list = task_names(tasks)
    diag_main = Path(ws.checks) / "mix_diagnostics.csv"
    diag = MixDiagnostics(shard_path(diag_main, shard).with_suffix(".csv"),
                           also_seen=[diag_main] if shard is not None else ())
    summary: list[dict] = []

    families: dict[str, list[str]] = {}
    for task in task_list:
        families.setdefault(TASKS[task][0], []).append(task)
    for entry in entries:
        model_dir = Path(ws.inference) / entry.id
        model_dir.mkdir(parents=True, exist_ok=True)
        na = not_applicable(entry, task_list)
        run_tasks = [t for t in task_list if t not in na]
        fams = {f: [t for t in ts if t not in na] for f, ts in families.items()}
        with shard_lock(model_dir, shard):
            if na:
                _log_run(shard_path(model_dir / "run_log.jsonl", shard),
                         {"event": "not_applicable", "model": entry.id, "tasks": na, "time": _now()})
                summary += [{"model": entry.id, "task": t, "status": "not_applicable", "error": why, "n_run": 0}
                            for t, why in na.items()]
            if run_tasks:
                summary += _run_model(ws, entry, {f: ts for f, ts in fams.items() if ts}, run_tasks,
                                      decoding=decoding, batch_size=batch_size, limit=limit, progress=progress,
                                      ps=ps, ps_record=ps_record, rerun_unkeyed=rerun_unkeyed, shard=shard,
                                      diag=diag)
    cols = ["model", "task", "status", "n_stimuli", "n_done_before", "n_run", "n_errors", "seconds",
            "stimuli_per_s", "manifest_sha256", "error", "file"]
    df = pd.DataFrame(summary)
    for c in cols:
        if c not in df.columns:
            df[c] = None
    return df[cols]


PAPER_BATCH_SIZE = 1
"""Stimuli per ``generate`` call of the transformers Speech LLMs in the ``paper`` profile: the
authors' ``scripts/05_inference.py`` decoded one stimulus at a time (batched greedy decoding with
padding, and 8-bit bitsandbytes kernels in particular, can change a generation)."""


def effective_batch_size(entry, batch_size: int | None, profile: str | None) -> int:
    """The batch size stage 7 decodes ``entry`` with.

    ``batch_size`` when given (the notebook's / caller's parameter, any profile); else
    :data:`PAPER_BATCH_SIZE` for a ``transformers`` entry in the ``paper`` profile; else the
    registry entry's ``batch_size``. For the batch-variant backends
    (:data:`aiplib.inference.keys.BATCH_VARIANT_BACKENDS`) it enters the resume key, so a changed batch
    size re-decodes.
    """
    if batch_size is not None:
        return int(batch_size)
    if profile == "paper" and entry.backend == "transformers":
        return PAPER_BATCH_SIZE
    return int(entry.batch_size or 1)


def _run_model(ws, entry, families, task_list, *, decoding, batch_size, limit, progress, ps, ps_record,
               rerun_unkeyed, shard, diag) -> list[dict]:
    """One model of :func:`run_inference` (plan, load if anything is left, run, log); its summary rows."""

    eff = effective_batch_size(entry, batch_size, getattr(ws, "profile", None))
    if eff != entry.batch_size:  # the resume key and run log see the batch size really used
        entry = dataclasses.replace(entry, batch_size=eff)
        batch_size = eff
    summary: list[dict] = []
    model_dir = Path(ws.inference) / entry.id
    if shard is None:  # an unsharded run owns <task>.jsonl: shard files waiting there are merged first
        merged = merge_model(model_dir)  # (refused while a shard still runs: it reads that file)
        if merged:
            log.warning("%s", summary_line(merged, model_dir))
    run_log = shard_path(model_dir / "run_log.jsonl", shard)
    label = shard_label(shard)
    started, t_model = _now(), time.perf_counter()
    dkey = decoding_key(entry, decoding)  # the window policy: part of every resume key
    plans = {fam: plan_family(ws, entry, fam, {t: result_path(ws, entry.id, t) for t in fam_tasks}, limit=limit,
                              ps=ps, rerun_unkeyed=rerun_unkeyed, shard=shard, decoding=dkey)
             for fam, fam_tasks in families.items()}
    if progress:
        _note_up_to_date(entry.id, plans, label)
    if not any(pl.get("n_work") for pl in plans.values()):  # nothing to decode: do not load the model
        stats = {t: st for pl in plans.values() for t, st in pl["result"].items()}
        _log_run(run_log, {"event": "up_to_date", "model": entry.id, "shard": label, "start": started,
                           "end": _now(), "seconds": round(time.perf_counter() - t_model, 3), "tasks": stats,
                           "prompt_set": ps_record, "entry": entry.to_dict()})
        for task in task_list:
            summary.append({"model": entry.id, "task": task, **stats[task]})
        return summary
    opts = {"path": decoding}  # the Whisper backend calls it its decoding path
    if batch_size is not None:
        opts["batch_size"] = int(batch_size)
    try:
        rec = models.load_model(entry, **opts)
    except Exception as exc:  # noqa: BLE001 - any load failure is logged, the stage goes on
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("%s: not run (%s)", entry.id, reason)
        _log_run(run_log, {"event": "load_failed", "model": entry.id, "shard": label, "error": _short(exc),
                           "error_type": type(exc).__name__, "start": started, "end": _now(),
                           "requested_decoding": decoding, "versions": _versions(), "prompt_set": ps_record,
                           "entry": entry.to_dict()})
        for task in task_list:
            summary.append({"model": entry.id, "task": task, "status": "unavailable",
                            "error": reason, "file": str(shard_path(result_path(ws, entry.id, task), shard))})
        return summary
    task_stats, info = {}, {}
    meter = Throughput(entry.id)
    try:
        try:
            info = rec.info()
        except Exception as exc:  # noqa: BLE001
            info = {"info_error": _short(exc)}
        bs = int(batch_size or getattr(rec, "batch_size", None) or entry.batch_size or 1)
        for family, fam_tasks in families.items():
            task_stats.update(_run_family(ws, rec, entry, family, fam_tasks, bs=bs, limit=limit,
                                          progress=progress, diag=diag, ps=ps, plan=plans[family],
                                          meter=meter, shard=shard))
        for task in task_list:
            summary.append({"model": entry.id, "task": task, **task_stats[task]})
        if progress and meter.families:
    
            note(meter.line())
    finally:
        diag.flush()
        try:  # throughput, RTFx and peak GPU memory, where the backend measures them
            end_stats = rec.stats() if hasattr(rec, "stats") else None
        except Exception as exc:  # noqa: BLE001 - diagnostics must not hide the run's result
            end_stats = {"stats_error": f"{type(exc).__name__}: {exc}"[:200]}
        rec.close()
        seconds = time.perf_counter() - t_model
        _log_run(run_log, {
            "event": "run", "model": entry.id, "shard": label, "start": started, "end": _now(),
            "seconds": round(seconds, 3), "decoding": info.get("path", decoding),
            "window": info.get("window"), "decoding_key": dkey,
            "revision": info.get("revision", entry.revision),
            "revision_requested": entry.revision, "stats": end_stats,
            "weights": info.get("weights_path", entry.weights),
            "weights_sha256": info.get("weights_sha256"), "batch_size": batch_size,
            "limit": limit, "n_done": sum(s.get("n_run", 0) - s.get("n_errors", 0)
                                         for s in task_stats.values()),
            "n_errors": sum(s.get("n_errors", 0) for s in task_stats.values()),
            "tasks": task_stats, "throughput": meter.record(), "info": info, "versions": _versions(),
            "prompt_set": ps_record, "entry": entry.to_dict()})
    return summary


def _note_up_to_date(model: str, plans: dict, shard_label=None) -> None:
    """One ``[progress]`` line per family with nothing to decode (its progress bar never shows), so
    an up-to-date stage 7 still says so on the console under ``make``, e.g.
    ``[progress] stage 7 whisper_tiny_en asr+asr_steer_p5: 0 to decode, 63 up to date``."""

    for pl in plans.values():
        if pl.get("n_work") or "manifest" not in pl:
            continue
        n_ref = sum(pl["refreshed"].values())
        where = f" (shard {shard_label})" if shard_label else ""
        note(f"stage 7 {model} {'+'.join(pl['result'])}{where}: 0 to decode, {len(pl['manifest'])} up to date"
             + (f", {n_ref} kept row(s) refreshed from the manifest" if n_ref else ""))


def _run_family(ws, rec, entry, family: str, tasks: list[str], *, bs: int, limit, progress: bool,
                diag, ps, plan: dict | None = None, meter: "Throughput | None" = None,
                shard: tuple[int, int] | None = None, decoding: dict | None = None) -> dict:
    """Run every task of one family over its manifest, batch by batch.

    The tasks of a family share their stimuli, so each stimulus is materialised once per batch
    and decoded with every task's prompt that still needs it (a backend can reuse its encoder
    output across prompts). Progress (:class:`aiplib.core.progress.Progress`) counts stimuli. Per task,
    ``seconds`` is its fair share of the loop's wall time (each batch's time split evenly over the
    decodes made in it, so the tasks' ``seconds`` sum to the loop's wall time) and
    ``decode_seconds`` its own time inside ``generate``; ``meter`` (if given) receives the
    family's stimuli, decodes, audio seconds and loop seconds. ``plan`` is :func:`aiplib.inference.resume.plan_family`'s
    (made here when None, for ``shard``, with the resume keys of ``decoding``). Each row records
    ``window_s``, the encoder window of a backend that chooses one (``rec.window_s(n_samples)``)."""
    if plan is None:
        plan = plan_family(ws, entry, family, {t: result_path(ws, entry.id, t) for t in tasks}, limit=limit, ps=ps,
                           rerun_unkeyed=False, shard=shard, decoding=decoding)
    window_of = getattr(rec, "window_s", None)
    if "manifest" not in plan:
        return plan["result"]
    manifest, m_sha, prompts, keys = plan["manifest"], plan["m_sha"], plan["prompts"], plan["keys"]
    todo, paths = plan["todo"], plan["paths"]
    need = set().union(*todo.values())
    records = [r for r in manifest.to_dict("records") if r["id"] in need]
    max_samples = int(round(float(entry.max_audio_s) * SR))
    stats = {t: {"n_err": 0, "seconds": 0.0, "decode_seconds": 0.0} for t in tasks}
    fam_audio_s, fam_decodes = 0.0, 0

    # Time accounting: the batch loop's wall time is cut into consecutive per-batch intervals
    # (materialising + every prompt's decode + writing), and each batch's interval is split evenly
    # over the decodes made in it (one per stimulus and prompt): the prompts of a family share the
    # stimulus and, on the fast path, the encoder output, so neither pays it alone. Per-task
    # ``seconds`` therefore sum to the loop's wall time; ``decode_seconds`` keeps each prompt's own
    # time inside ``generate`` (the first prompt on a stimulus includes the shared encoder).

    where = f" · shard {shard[0]}/{shard[1]}" if shard is not None else ""
    bar = Progress(len(records), f"{entry.id} · {'+'.join(tasks)}{where}", unit="stim",
                   enabled=bool(progress and records))
    batches = [records[k: k + bs] for k in range(0, len(records), bs)]
    loop_t0 = t_prev = time.perf_counter()
    # the next batch is mixed in a thread while this one is decoded (numpy/scipy release the GIL)
    mixer = ThreadPoolExecutor(1, thread_name_prefix="aip-mix")
    try:
        ahead = mixer.submit(mix_batch, batches[0], ws, max_samples) if batches else None
        for k, batch in enumerate(batches):
            done = ahead.result()
            ahead = mixer.submit(mix_batch, batches[k + 1], ws, max_samples) if k + 1 < len(batches) else None
            mixed = []  # (record, audio or None, audio_s, error)
            for r, y, info, err in done:
                if err is None:
                    diag.add(r, family, info)
                    fam_audio_s += len(y) / SR
                mixed.append((r, y, None if y is None else round(len(y) / SR, 4), err))
            diag.flush()
            n_dec = {}
            for t in tasks:
                prompt_id, text = prompts[t]
                rows, ok, audios = [], [], []
                for r, y, audio_s, err in mixed:
                    if r["id"] not in todo[t]:
                        continue
                    rows.append({"manifest": r, "raw": ERROR_RESPONSE, "model": entry.id, "task": t,
                                 "prompt_set": ps.name, "prompt_id": prompt_id, "decode_s": None, "audio_s": audio_s,
                                 "stim_key": keys[t][r["id"]], "batch_size": None, "error": err,
                                 "window_s": window_of(len(y)) if (window_of and y is not None) else None})
                    if err is None:
                        ok.append(rows[-1])
                        audios.append(y)
                if ok:
                    t0 = time.perf_counter()
                    generate_into(rec, ok, audios, text if getattr(entry, "takes_prompt", True) else None)
                    stats[t]["decode_seconds"] += time.perf_counter() - t0
                for row in rows:
                    if row["error"] is not None:
                        stats[t]["n_err"] += 1
                append_jsonl_lines(paths[t], [inference_row_json(output_row(row)) for row in rows])
                n_dec[t] = len(rows)
            t_now = time.perf_counter()
            n_batch = sum(n_dec.values())
            for t, n in n_dec.items():
                if n_batch:
                    stats[t]["seconds"] += (t_now - t_prev) * n / n_batch
            t_prev = t_now
            fam_decodes += n_batch
            bar.update(len(batch))
    finally:
        mixer.shutdown(wait=True, cancel_futures=True)
        bar.close()
    loop_s = time.perf_counter() - loop_t0
    if meter is not None:
        meter.add(family=family, stimuli=len(records), decodes=fam_decodes, audio_s=fam_audio_s,
                  seconds=loop_s)
    out = {}
    for t in tasks:
        n_todo, secs = len(todo[t]), stats[t]["seconds"]
        out[t] = {"status": "done", "n_stimuli": len(manifest), "n_done_before": len(manifest) - n_todo,
                  "n_run": n_todo, "n_errors": stats[t]["n_err"], "seconds": round(secs, 3),
                  "decode_seconds": round(stats[t]["decode_seconds"], 3),
                  "stimuli_per_s": round(n_todo / secs, 3) if n_todo and secs > 0 else None,
                  "manifest_sha256": m_sha, "error": None, "file": str(paths[t])}
    return out


def raise_if_not_run(summary: pd.DataFrame) -> None:
    """Fail loudly when a requested model or task did not run (after the others have).

    The runner logs an unavailable model and goes on with the next, so one missing GPU never
    costs the other models' work; this check, called at the end of stage 7, then makes the stage
    fail with one line per model or task that did not run.

    Parameters
    ----------
    summary : DataFrame
        What :func:`run_inference` returned.

    Raises
    ------
    ModelUnavailableError
        If any row's ``status`` is neither ``done`` nor ``not_applicable`` (a steering task of a
        model that takes no prompt, :func:`not_applicable`); the message lists each model, task
        and reason.
    """
    bad = summary[~summary["status"].isin(["done", "not_applicable"])]
    if len(bad):
        lines = [f"{r.model} / {r.task}: {r.status} — {r.error}" for r in bad.itertuples()]
        raise ModelUnavailableError("not run:\n" + "\n".join(dict.fromkeys(lines)))


STAGE7_TIMES_COLUMNS = ["run_start", "condition_family", "models", "tasks", "seconds", "n_stimuli", "n_run",
                        "n_errors"]
"""Columns of ``checks/stage7_families.csv``: one row per family per stage-7 run (appended)."""


def run_suite(ws, suite, **kwargs):
    """Stage 7 over a suite: :func:`aiplib.inference.runner.run_inference` on each family's view.

    Parameters
    ----------
    ws : Workspace
        Any view; each family runs on ``ws.with_family(cf)``.
    suite : str or sequence of str
        :func:`aiplib.core.tasks.parse_suite`.
    **kwargs
        Passed to ``run_inference`` (``models``, ``tasks``, ``limit``, ``prompt_set`` …).

    Returns
    -------
    summary : pandas.DataFrame
        ``run_inference``'s summary rows with a first column ``condition_family``.
    times : pandas.DataFrame
        One row per family, :data:`STAGE7_TIMES_COLUMNS`: ``seconds`` is the wall time of that
        family's ``run_inference`` call (model loading included: each call loads and closes its
        models), ``n_run`` the stimulus-prompt decodes made. Appended to
        ``checks/stage7_families.csv`` (the shared ``checks`` folder), so the report can list the
        stage-7 time per family (take the last row per family with ``n_run > 0``).
    """
    start = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    frames, times = [], []
    for cf in parse_suite(suite):
        t0 = time.perf_counter()
        s = run_inference(ws.with_family(cf), **kwargs)
        secs = time.perf_counter() - t0
        frames.append(s.assign(condition_family=cf)[["condition_family", *s.columns]])
        num = lambda c: int(pd.to_numeric(s[c], errors="coerce").fillna(0).sum())  # noqa: E731
        times.append(dict(run_start=start, condition_family=cf, models=",".join(sorted(set(s["model"].astype(str)))),
                          tasks=",".join(dict.fromkeys(s["task"].astype(str))), seconds=round(secs, 3),
                          n_stimuli=num("n_stimuli"), n_run=num("n_run"), n_errors=num("n_errors")))
    times = pd.DataFrame(times, columns=STAGE7_TIMES_COLUMNS)
    path = ws.with_family("background").checks / "stage7_families.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    # appended, never rewritten: stage-7 shards finishing at once (a Slurm array) keep every row
    with open(path, "a", newline="") as f:
        times.to_csv(f, header=f.tell() == 0, index=False)
    return pd.concat(frames, ignore_index=True), times
