"""Stage 7: decode every stimulus with every (model, task), resumably, one JSONL row per stimulus.

:func:`run_suite` (notebook 07) → :func:`run_inference` per condition family → :func:`_run_model`
  per
model → :func:`_run_family` per task family → :mod:`aiplib.inference.batch_decode` per batch. Writes
``inference/<model>/<task>.jsonl`` (append-only; a failure is an ``__ERROR__`` row, retried by the
next run), ``inference/<model>/run_log.jsonl`` and ``checks/mix_diagnostics.csv``. Each batch is
materialised once (the next one in a background thread) and decoded with every prompt of its task
family.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from aiplib.core.errors import ModelUnavailableError
from aiplib.core.progress import Progress, note
from aiplib.core.tasks import parse_suite
from aiplib.inference import models
from aiplib.inference.batch_decode import generate_into, mix_batch, output_row
from aiplib.inference.keys import ATTENTION_FIELD
from aiplib.inference.plan import (
    DecodingConfig,
    RunPlan,
    configure,
    effective_attn_implementation,
    effective_batch_size,
)
from aiplib.inference.prompts import not_applicable, prompt_set_record
from aiplib.inference.resume import plan_family
from aiplib.inference.run_records import (
    MixDiagnostics,
    Throughput,
    log_run,
    now_iso,
    short_error,
    versions,
)
from aiplib.inference.shards import merge_model, shard_label, shard_lock, shard_path, summary_line
from aiplib.io.audio import SR
from aiplib.io.formats import ERROR_RESPONSE, append_jsonl_lines, inference_row_json

log = logging.getLogger(__name__)

# checks/stage7_families.csv: one row per condition family per stage-7 run (appended)
STAGE7_TIMES_COLUMNS = [
    "run_start",
    "condition_family",
    "models",
    "tasks",
    "seconds",
    "n_stimuli",
    "n_run",
    "n_errors",
]
SUMMARY_COLUMNS = [
    "model",
    "task",
    "status",
    "n_stimuli",
    "n_done_before",
    "n_run",
    "n_errors",
    "seconds",
    "stimuli_per_s",
    "manifest_sha256",
    "error",
    "file",
]  # run_inference's summary


def run_suite(ws, suite="background", **options):
    """Stage 7 over the condition families of ``suite`` (:func:`aiplib.core.tasks.parse_suite`):
    :func:`run_inference` on each family's view, ``options`` as
    :func:`aiplib.inference.plan.configure`, resolved once.

    Returns ``(summary, times)``: :func:`run_inference`'s rows with a first column
    ``condition_family``, and one row per family (:data:`STAGE7_TIMES_COLUMNS`; ``seconds`` includes
    model loading), appended to ``checks/stage7_families.csv``.
    """
    plan, config = configure(ws, options)
    start = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    frames, times = [], []
    for cf in parse_suite(suite):
        t0 = time.perf_counter()
        s = run_inference(ws.with_family(cf), plan, config)
        secs = time.perf_counter() - t0
        frames.append(s.assign(condition_family=cf)[["condition_family", *s.columns]])
        num = lambda c: int(pd.to_numeric(s[c], errors="coerce").fillna(0).sum())  # noqa: E731
        times.append(
            dict(
                run_start=start,
                condition_family=cf,
                models=",".join(sorted(set(s["model"].astype(str)))),
                tasks=",".join(dict.fromkeys(s["task"].astype(str))),
                seconds=round(secs, 3),
                n_stimuli=num("n_stimuli"),
                n_run=num("n_run"),
                n_errors=num("n_errors"),
            )
        )
    times = pd.DataFrame(times, columns=STAGE7_TIMES_COLUMNS)
    path = ws.with_family("background").checks / "stage7_families.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:  # appended: shards finishing at once keep every row
        times.to_csv(f, header=f.tell() == 0, index=False)
    return pd.concat(frames, ignore_index=True), times


def run_inference(
    ws, plan: RunPlan | None = None, config: DecodingConfig | None = None, **options
) -> pd.DataFrame:
    """Decode every stimulus of one workspace view (``manifests/<family>.csv``) with every model and
    task, resuming.

    ``plan`` and ``config`` are made from ``options`` (:func:`aiplib.inference.plan.configure`,
    which gives the ``KeyError`` and ``AiplibParameterError`` raised) when not given. Returns one
    row per (model, task), :data:`SUMMARY_COLUMNS`; ``status`` is ``done``, ``unavailable`` (the
    model did not load: the reason in ``error``), ``no_manifest`` or ``not_applicable``. Raises
    :class:`aiplib.inference.shards.ShardBusyError` if another process runs the same shard of a
      model.
    """
    if plan is None or config is None:
        made = configure(ws, options)
        plan, config = plan or made[0], config or made[1]
    elif options:
        raise TypeError(f"options {', '.join(options)} given with a plan and a config")
    diag_main = Path(ws.checks) / "mix_diagnostics.csv"
    diag = MixDiagnostics(
        shard_path(diag_main, plan.shard).with_suffix(".csv"),
        also_seen=[diag_main] if plan.shard is not None else (),
    )
    summary: list[dict] = []
    for entry in plan.entries:
        model_dir = Path(ws.inference) / entry.id
        model_dir.mkdir(parents=True, exist_ok=True)
        with shard_lock(model_dir, plan.shard):
            summary += _run_model(ws, entry, plan, config, diag)
    df = pd.DataFrame(summary)
    return df.assign(**{c: None for c in SUMMARY_COLUMNS if c not in df.columns})[SUMMARY_COLUMNS]


@dataclasses.dataclass
class _ModelRun:
    """One loaded model's share of a run: what :func:`_run_family` needs."""

    ws: object
    entry: object
    rec: object
    plan: RunPlan
    config: DecodingConfig
    diag: MixDiagnostics
    meter: Throughput
    bs: int


def _run_model(
    ws, entry, plan: RunPlan, config: DecodingConfig, diag: MixDiagnostics
) -> list[dict]:
    """One model: plan its families, load it if anything is left, run them, log; its summary
    rows."""
    label, model_dir = shard_label(plan.shard), Path(ws.inference) / entry.id
    run_log = shard_path(model_dir / "run_log.jsonl", plan.shard)
    na = not_applicable(entry, plan.tasks)
    summary = [
        {"model": entry.id, "task": t, "status": "not_applicable", "error": why, "n_run": 0}
        for t, why in na.items()
    ]
    if na:
        log_run(
            run_log, {"event": "not_applicable", "model": entry.id, "tasks": na, "time": now_iso()}
        )
    tasks = [t for t in plan.tasks if t not in na]
    if not tasks:
        return summary
    families = {
        f: [t for t in ts if t not in na] for f, ts in plan.families.items() if set(ts) - set(na)
    }
    eff = effective_batch_size(entry, config.batch_size, getattr(ws, "profile", None))
    # the batch size asked of the backend (None: its own); the resume key and run log see the one
    # used
    batch_size = eff if config.batch_size is not None or eff != entry.batch_size else None
    entry = dataclasses.replace(entry, batch_size=eff) if eff != entry.batch_size else entry
    attn_implementation = effective_attn_implementation(entry, getattr(ws, "profile", None))
    if attn_implementation is not None:  # the authors' kernel (PROFILE=paper) enters the resume key
        extra = {**entry.extra, ATTENTION_FIELD: attn_implementation}
        entry = dataclasses.replace(entry, extra=extra)
    # an unsharded run owns <task>.jsonl: shard files waiting there are merged first (refused while
    # a shard still runs: it reads that file)
    if plan.shard is None and (merged := merge_model(model_dir)):
        log.warning("%s", summary_line(merged, model_dir))
    started, t_model = now_iso(), time.perf_counter()

    def record(event, **fields):
        log_run(
            run_log,
            {
                "event": event,
                "model": entry.id,
                "shard": label,
                "start": started,
                "end": now_iso(),
                "seconds": round(time.perf_counter() - t_model, 3),
                **fields,
                "prompt_set": prompt_set_record(plan.prompt_set),
                "entry": entry.to_dict(),
            },
        )

    dkey = models.decoding_key(entry, config.path)  # the window policy: part of every resume key
    plans = {
        fam: plan_family(ws, entry, fam, fam_tasks, plan, config)
        for fam, fam_tasks in families.items()
    }
    where = f" (shard {label})" if label else ""
    for pl in (
        plans.values() if config.progress else ()
    ):  # a family with nothing to decode still says so
        if not pl.get("n_work") and "manifest" in pl:
            n_ref = sum(pl["refreshed"].values())
            note(
                f"stage 7 {entry.id} {'+'.join(pl['result'])}{where}: 0 to decode, {len(pl['manifest'])} up to date"
                + (f", {n_ref} kept row(s) refreshed from the manifest" if n_ref else "")
            )
    if not any(
        pl.get("n_work") for pl in plans.values()
    ):  # nothing to decode: do not load the model
        stats = {t: st for pl in plans.values() for t, st in pl["result"].items()}
        record("up_to_date", tasks=stats)
        return summary + [{"model": entry.id, "task": task, **stats[task]} for task in tasks]
    load_options = {"path": config.path}  # "path": the Whisper backend's decoding path
    if batch_size is not None:
        load_options["batch_size"] = batch_size
    if attn_implementation is not None:  # the authors' attention kernel (PROFILE=paper)
        load_options["attn_implementation"] = attn_implementation
    try:
        rec = models.load_model(entry, **load_options)
    except Exception as exc:  # noqa: BLE001 - any load failure is logged, the stage goes on
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("%s: not run (%s)", entry.id, reason)
        record(
            "load_failed",
            error=short_error(exc),
            error_type=type(exc).__name__,
            requested_decoding=config.path,
            versions=versions(),
        )
        return summary + [
            {
                "model": entry.id,
                "task": task,
                "status": "unavailable",
                "error": reason,
                "file": str(shard_path(ws.inference_jsonl(entry.id, task), plan.shard)),
            }
            for task in tasks
        ]
    task_stats, info = {}, {}
    run = _ModelRun(
        ws,
        entry,
        rec,
        plan,
        config,
        diag,
        Throughput(entry.id),
        bs=int(batch_size or getattr(rec, "batch_size", None) or entry.batch_size or 1),
    )
    try:
        try:
            info = rec.info()
        except Exception as exc:  # noqa: BLE001
            info = {"info_error": short_error(exc)}
        for family in families:
            task_stats.update(_run_family(run, family, plans[family]))
        summary += [{"model": entry.id, "task": task, **task_stats[task]} for task in tasks]
        if config.progress and run.meter.families:
            note(run.meter.line())
    finally:
        diag.flush()
        try:  # throughput, RTFx and peak GPU memory, where the backend measures them
            end_stats = rec.stats() if hasattr(rec, "stats") else None
        except Exception as exc:  # noqa: BLE001 - diagnostics must not hide the run's result
            end_stats = {"stats_error": f"{type(exc).__name__}: {exc}"[:200]}
        rec.close()
        n_errors = sum(s.get("n_errors", 0) for s in task_stats.values())
        record(
            "run",
            decoding=info.get("path", config.path),
            window=info.get("window"),
            decoding_key=dkey,
            revision=info.get("revision", entry.revision),
            revision_requested=entry.revision,
            stats=end_stats,
            weights=info.get("weights_path", entry.weights),
            weights_sha256=info.get("weights_sha256"),
            batch_size=batch_size,
            attn_implementation=attn_implementation,
            limit=config.limit,
            n_done=sum(s.get("n_run", 0) for s in task_stats.values()) - n_errors,
            n_errors=n_errors,
            tasks=task_stats,
            throughput=run.meter.record(),
            info=info,
            versions=versions(),
        )
    return summary


def _run_family(run: _ModelRun, family: str, fplan: dict) -> dict:
    """Decode one task family's pending stimuli with every task's prompt, batch by batch.

    Per task, ``seconds`` is its share of the loop's wall time (each batch's interval split evenly
    over the decodes made in it) and ``decode_seconds`` its own time inside ``generate``.
    """
    if "manifest" not in fplan:
        return fplan["result"]
    entry, rec, manifest, todo, paths = (
        run.entry,
        run.rec,
        fplan["manifest"],
        fplan["todo"],
        fplan["paths"],
    )
    window_of, need = getattr(rec, "window_s", None), set().union(*todo.values())
    records = [r for r in manifest.to_dict("records") if r["id"] in need]
    batches = [records[k : k + run.bs] for k in range(0, len(records), run.bs)]
    max_samples = int(round(float(entry.max_audio_s) * SR))
    n_err, seconds, decode_s = (
        dict.fromkeys(paths, 0),
        dict.fromkeys(paths, 0.0),
        dict.fromkeys(paths, 0.0),
    )
    fam_audio_s, fam_decodes = 0.0, 0
    where = f" · shard {shard_label(run.plan.shard)}" if run.plan.shard is not None else ""
    bar = Progress(
        len(records),
        f"{entry.id} · {'+'.join(paths)}{where}",
        unit="stim",
        enabled=bool(run.config.progress and records),
    )
    loop_t0 = t_prev = time.perf_counter()
    # the next batch is mixed in a thread while this one is decoded (numpy/scipy release the GIL)
    mixer = ThreadPoolExecutor(1, thread_name_prefix="aip-mix")
    mix = lambda k: (
        mixer.submit(mix_batch, batches[k], run.ws, max_samples) if k < len(batches) else None
    )  # noqa: E731
    try:
        ahead = mix(0)
        for k, batch in enumerate(batches):
            done, ahead = (
                ahead.result(),
                mix(k + 1),
            )  # (record, audio or None, MixInfo or None, error or None)
            for r, y, info, err in done:
                if err is None:
                    run.diag.add(r, family, info)
                    fam_audio_s += len(y) / SR
            run.diag.flush()
            n_dec = {}
            for t in paths:
                (prompt_id, text), keys = fplan["prompts"][t], fplan["keys"][t]
                mine = [(r, y, err) for r, y, _, err in done if r["id"] in todo[t]]
                rows = [
                    {
                        "manifest": r,
                        "raw": ERROR_RESPONSE,
                        "model": entry.id,
                        "task": t,
                        "error": err,
                        "prompt_set": run.plan.prompt_set.name,
                        "prompt_id": prompt_id,
                        "stim_key": keys[r["id"]],
                        "decode_s": None,
                        "batch_size": None,
                        "audio_s": None if y is None else round(len(y) / SR, 4),
                        "window_s": window_of(len(y)) if window_of and y is not None else None,
                    }
                    for r, y, err in mine
                ]
                if ok := [(row, y) for row, (_, y, err) in zip(rows, mine) if err is None]:
                    t0 = time.perf_counter()
                    generate_into(
                        rec,
                        [row for row, _ in ok],
                        [y for _, y in ok],
                        text if getattr(entry, "takes_prompt", True) else None,
                    )
                    decode_s[t] += time.perf_counter() - t0
                n_err[t] += sum(row["error"] is not None for row in rows)
                append_jsonl_lines(paths[t], [inference_row_json(output_row(row)) for row in rows])
                n_dec[t] = len(rows)
            t_now, n_batch = time.perf_counter(), sum(n_dec.values())
            for t, n in n_dec.items():
                seconds[t] += (t_now - t_prev) * n / n_batch if n_batch else 0.0
            t_prev, fam_decodes = t_now, fam_decodes + n_batch
            bar.update(len(batch))
    finally:
        mixer.shutdown(wait=True, cancel_futures=True)
        bar.close()
    run.meter.add(
        family=family,
        stimuli=len(records),
        decodes=fam_decodes,
        audio_s=fam_audio_s,
        seconds=time.perf_counter() - loop_t0,
    )
    return {
        t: {
            "status": "done",
            "n_stimuli": len(manifest),
            "n_done_before": len(manifest) - len(todo[t]),
            "n_run": len(todo[t]),
            "n_errors": n_err[t],
            "seconds": round(seconds[t], 3),
            "decode_seconds": round(decode_s[t], 3),
            "stimuli_per_s": round(len(todo[t]) / seconds[t], 3)
            if todo[t] and seconds[t] > 0
            else None,
            "manifest_sha256": fplan["m_sha"],
            "error": None,
            "file": str(paths[t]),
        }
        for t in paths
    }


def raise_if_not_run(summary: pd.DataFrame) -> None:
    """Raise :class:`ModelUnavailableError`, one line per model, task and reason, when a row of
    :func:`run_inference`'s ``summary`` is neither ``done`` nor ``not_applicable``."""
    if len(bad := summary[~summary["status"].isin(["done", "not_applicable"])]):
        lines = [f"{r.model} / {r.task}: {r.status} — {r.error}" for r in bad.itertuples()]
        raise ModelUnavailableError("not run:\n" + "\n".join(dict.fromkeys(lines)))
