"""Stage 7: decode every stimulus with every (model, task), resumably, one JSONL row per stimulus.

:func:`run_suite` (notebook 07) → :func:`run_inference` per condition family → :func:`_run_model`
per model → :func:`_run_family` per task family → :mod:`aiplib.inference.batch_decode` per batch.
Writes ``inference/<model>/<task>.jsonl`` (append-only; a failure is an ``__ERROR__`` row, retried
by the next run), ``inference/<model>/run_log.jsonl`` and ``checks/mix_diagnostics.csv``. Each batch
is materialised once (the next one in a background thread) and decoded with every prompt of its task
family.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from aiplib.core.errors import ModelUnavailableError
from aiplib.core.progress import Progress, note
from aiplib.core.tasks import parse_suite
from aiplib.core.workspace import Workspace
from aiplib.inference import models
from aiplib.inference.batch_decode import generate_into, mix_batch, output_row
from aiplib.inference.keys import ATTENTION_FIELD
from aiplib.inference.models.base import Recogniser
from aiplib.inference.models.registry import DEFAULT_MODEL, ModelEntry
from aiplib.inference.plan import (
    DEFAULT_DECODING,
    DEFAULT_TASKS,
    LIMIT_SEED,
    DecodingConfig,
    RunOptions,
    RunPlan,
    configure,
    effective_attn_implementation,
    effective_batch_size,
)
from aiplib.inference.prompts import PromptSet, not_applicable, prompt_set_record
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

#: checks/stage7_families.csv: one row per condition family per stage-7 run (appended).
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
#: run_inference's summary: one row per (model, task).
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
]


def run_suite(
    ws: Workspace,
    suite: str = "background",
    *,
    models: str | Sequence[str] = DEFAULT_MODEL,
    tasks: str | Sequence[str] = DEFAULT_TASKS,
    prompt_set: str | PromptSet | None = None,
    shard: str | tuple | bool | None = None,
    decoding: str = DEFAULT_DECODING,
    batch_size: int | None = None,
    limit: int | None = None,
    progress: bool = True,
    rerun_unkeyed: bool = False,
    arrangement: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stage 7 over the condition families of ``suite`` (:func:`aiplib.core.tasks.parse_suite`):
    :func:`run_inference` on each family's view, the keywords as
    :class:`aiplib.inference.plan.RunOptions`, resolved once (:func:`configure`, which gives the
    ``KeyError`` and ``AiplibParameterError`` raised).

    Returns ``(summary, times)``: :func:`run_inference`'s rows with a first column
    ``condition_family``, and one row per family (:data:`STAGE7_TIMES_COLUMNS`; ``seconds`` includes
    model loading), appended to ``checks/stage7_families.csv``.
    """
    options = RunOptions(
        models=models,
        tasks=tasks,
        prompt_set=prompt_set,
        shard=shard,
        decoding=decoding,
        batch_size=batch_size,
        limit=limit,
        progress=progress,
        rerun_unkeyed=rerun_unkeyed,
        arrangement=arrangement,
    )
    plan, config = configure(ws, options)
    start = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    frames = []
    times = []
    for cf in parse_suite(suite):
        t0 = time.perf_counter()
        s = run_inference(ws.with_family(cf), plan, config)
        secs = time.perf_counter() - t0
        frames.append(s.assign(condition_family=cf)[["condition_family", *s.columns]])
        times.append(_family_time(s, start, cf, secs))
    times = pd.DataFrame(times, columns=STAGE7_TIMES_COLUMNS)
    _append_family_times(ws, times)
    return pd.concat(frames, ignore_index=True), times


def _column_total(summary: pd.DataFrame, column: str) -> int:
    """The sum of a count column of :func:`run_inference`'s summary (missing values count 0)."""
    return int(pd.to_numeric(summary[column], errors="coerce").fillna(0).sum())


def _unique_in_order(values) -> list[str]:
    """``values`` without repeats, in first-seen order."""
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def _family_time(summary: pd.DataFrame, start: str, family: str, seconds: float) -> dict:
    """One row of ``checks/stage7_families.csv`` (:data:`STAGE7_TIMES_COLUMNS`)."""
    return dict(
        run_start=start,
        condition_family=family,
        models=",".join(sorted(set(summary["model"].astype(str)))),
        tasks=",".join(_unique_in_order(summary["task"].astype(str))),
        seconds=round(seconds, 3),
        n_stimuli=_column_total(summary, "n_stimuli"),
        n_run=_column_total(summary, "n_run"),
        n_errors=_column_total(summary, "n_errors"),
    )


def _append_family_times(ws: Workspace, times: pd.DataFrame) -> None:
    """Append ``times`` to ``checks/stage7_families.csv`` (the header only into a new file)."""
    path = ws.with_family("background").checks / "stage7_families.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:  # appended: shards finishing at once keep every row
        times.to_csv(f, header=f.tell() == 0, index=False)


def run_inference(
    ws: Workspace,
    plan: RunPlan | None = None,
    config: DecodingConfig | None = None,
    *,
    models: str | Sequence[str] = DEFAULT_MODEL,
    tasks: str | Sequence[str] = DEFAULT_TASKS,
    prompt_set: str | PromptSet | None = None,
    shard: str | tuple | bool | None = None,
    decoding: str = DEFAULT_DECODING,
    batch_size: int | None = None,
    limit: int | None = None,
    progress: bool = True,
    rerun_unkeyed: bool = False,
    arrangement: str | None = None,
) -> pd.DataFrame:
    """Decode every stimulus of one workspace view (``manifests/<family>.csv``) with every model and
    task, resuming.

    ``plan`` and ``config`` are made from the keywords (:class:`aiplib.inference.plan.RunOptions`,
    :func:`aiplib.inference.plan.configure`, which gives the ``KeyError`` and
    ``AiplibParameterError`` raised) when not given; with both given the keywords are not used.
    Returns one row per (model, task), :data:`SUMMARY_COLUMNS`; ``status`` is ``done``,
    ``unavailable`` (the model did not load: the reason in ``error``), ``no_manifest`` or
    ``not_applicable``. Raises :class:`aiplib.inference.shards.ShardBusyError` if another process
    runs the same shard of a model.
    """
    if plan is None or config is None:
        options = RunOptions(
            models=models,
            tasks=tasks,
            prompt_set=prompt_set,
            shard=shard,
            decoding=decoding,
            batch_size=batch_size,
            limit=limit,
            progress=progress,
            rerun_unkeyed=rerun_unkeyed,
            arrangement=arrangement,
        )
        made_plan, made_config = configure(ws, options)
        plan = plan or made_plan
        config = config or made_config
    diag_main = Path(ws.checks) / "mix_diagnostics.csv"
    diag = MixDiagnostics(
        shard_path(diag_main, plan.shard).with_suffix(".csv"),
        also_seen=[diag_main] if plan.shard is not None else (),
    )
    stage = _StageRun(ws, plan, config, diag)
    summary: list[dict] = []
    for entry in plan.entries:
        model_dir = Path(ws.inference) / entry.id
        model_dir.mkdir(parents=True, exist_ok=True)
        with shard_lock(model_dir, plan.shard):
            summary += _run_model(stage, entry)
    df = pd.DataFrame(summary)
    return df.assign(**{c: None for c in SUMMARY_COLUMNS if c not in df.columns})[SUMMARY_COLUMNS]


@dataclasses.dataclass(frozen=True)
class _StageRun:
    """What every model of one stage-7 run over a workspace view shares."""

    ws: Workspace
    plan: RunPlan
    config: DecodingConfig
    diag: MixDiagnostics


@dataclasses.dataclass(frozen=True)
class _ModelSetup:
    """One model as this run loads it.

    ``entry`` carries the batch size and attention kernel used (both enter the resume key and the
    run log); ``batch_size`` and ``attn_implementation`` are what the backend is asked (None: its
    own).
    """

    entry: ModelEntry
    batch_size: int | None
    attn_implementation: str | None


@dataclasses.dataclass(frozen=True)
class _LoadedModel:
    """A loaded recogniser, the entry it was loaded from and its stimuli per ``generate`` call."""

    entry: ModelEntry
    recogniser: Recogniser
    batch_size: int


class _RunLog:
    """One model's ``run_log.jsonl`` records, each stamped with the run's start, end and seconds."""

    def __init__(self, path: Path, entry: ModelEntry, stage: _StageRun):
        self.path = path
        self.entry = entry
        self.shard = shard_label(stage.plan.shard)
        self.prompt_set = stage.plan.prompt_set
        self.started = now_iso()
        self.t0 = time.perf_counter()

    def write(self, event: str, fields: dict) -> None:
        """Append one record: ``event``, the model and timing, ``fields``, then the prompt set and
        the entry."""
        log_run(
            self.path,
            {
                "event": event,
                "model": self.entry.id,
                "shard": self.shard,
                "start": self.started,
                "end": now_iso(),
                "seconds": round(time.perf_counter() - self.t0, 3),
                **fields,
                "prompt_set": prompt_set_record(self.prompt_set),
                "entry": self.entry.to_dict(),
            },
        )


def _run_model(stage: _StageRun, entry: ModelEntry) -> list[dict]:
    """One model: plan its families, load it if anything is left, run them, log; its summary
    rows."""
    plan = stage.plan
    model_dir = Path(stage.ws.inference) / entry.id
    run_log_path = shard_path(model_dir / "run_log.jsonl", plan.shard)
    na = not_applicable(entry, plan.tasks)
    summary = _not_applicable_rows(entry, na)
    if na:
        log_run(
            run_log_path,
            {"event": "not_applicable", "model": entry.id, "tasks": na, "time": now_iso()},
        )
    tasks = [t for t in plan.tasks if t not in na]
    if not tasks:
        return summary
    families = _applicable_families(plan, na)
    setup = _model_setup(stage, entry)
    if plan.shard is None:
        _merge_waiting_shards(model_dir)
    run_log = _RunLog(run_log_path, setup.entry, stage)
    plans = {
        fam: plan_family(stage.ws, setup.entry, fam, fam_tasks, plan, stage.config)
        for fam, fam_tasks in families.items()
    }
    if stage.config.progress:
        _note_up_to_date(setup.entry, plans, plan.shard)
    if not any(pl.get("n_work") for pl in plans.values()):
        return summary + _up_to_date_rows(run_log, setup.entry, plans, tasks)
    try:
        recogniser = _load(setup, stage.config)
    except Exception as exc:  # noqa: BLE001 - any load failure is logged, the stage goes on
        return summary + _load_failed_rows(stage, run_log, setup.entry, tasks, exc)
    return summary + _decode_families(stage, setup, recogniser, run_log, plans, tasks)


def _not_applicable_rows(entry: ModelEntry, na: dict[str, str]) -> list[dict]:
    """The summary rows of the tasks ``entry`` skips (``{task: reason}``)."""
    return [
        {"model": entry.id, "task": t, "status": "not_applicable", "error": why, "n_run": 0}
        for t, why in na.items()
    ]


def _applicable_families(plan: RunPlan, na: dict[str, str]) -> dict[str, list[str]]:
    """Task family → its tasks the model answers (families with none left out)."""
    families = {}
    for family, family_tasks in plan.families.items():
        if set(family_tasks) - set(na):
            families[family] = [t for t in family_tasks if t not in na]
    return families


def _model_setup(stage: _StageRun, entry: ModelEntry) -> _ModelSetup:
    """The entry with the batch size and attention kernel this run uses, and what the backend is
    asked."""
    profile = getattr(stage.ws, "profile", None)
    requested = stage.config.batch_size
    eff = effective_batch_size(entry, requested, profile)
    # the batch size asked of the backend (None: its own); the resume key and run log see the one
    # used
    batch_size = eff if requested is not None or eff != entry.batch_size else None
    if eff != entry.batch_size:
        entry = dataclasses.replace(entry, batch_size=eff)
    attn_implementation = effective_attn_implementation(entry, profile)
    if attn_implementation is not None:  # the authors' kernel (PROFILE=paper) enters the resume key
        extra = {**entry.extra, ATTENTION_FIELD: attn_implementation}
        entry = dataclasses.replace(entry, extra=extra)
    return _ModelSetup(entry, batch_size, attn_implementation)


def _merge_waiting_shards(model_dir: Path) -> None:
    """An unsharded run owns ``<task>.jsonl``: shard files waiting there are merged first (refused
    while a shard still runs: it reads that file)."""
    merged = merge_model(model_dir)
    if merged:
        log.warning("%s", summary_line(merged, model_dir))


def _note_up_to_date(entry: ModelEntry, plans: dict[str, dict], shard) -> None:
    """Say so for each family with nothing to decode (and a manifest)."""
    label = shard_label(shard)
    where = f" (shard {label})" if label else ""
    for pl in plans.values():
        if pl.get("n_work") or "manifest" not in pl:
            continue
        n_ref = sum(pl["refreshed"].values())
        tasks = "+".join(pl["result"])
        line = f"stage 7 {entry.id} {tasks}{where}: 0 to decode, {len(pl['manifest'])} up to date"
        if n_ref:
            line += f", {n_ref} kept row(s) refreshed from the manifest"
        note(line)


def _up_to_date_rows(
    run_log: _RunLog, entry: ModelEntry, plans: dict[str, dict], tasks: list[str]
) -> list[dict]:
    """Nothing to decode: log it (the model is not loaded); the tasks' summary rows."""
    stats = {}
    for pl in plans.values():
        stats.update(pl["result"])
    run_log.write("up_to_date", {"tasks": stats})
    return [{"model": entry.id, "task": task, **stats[task]} for task in tasks]


def _load(setup: _ModelSetup, config: DecodingConfig) -> Recogniser:
    """Load the model: ``path`` is the Whisper backend's decoding path, ``arrangement`` its CPU
    arrangement; the batch size and the authors' attention kernel (PROFILE=paper) only when
    set."""
    return models.load_model(
        setup.entry,
        path=config.path,
        batch_size=setup.batch_size,
        attn_implementation=setup.attn_implementation,
        arrangement=config.arrangement,
    )


def _load_failed_rows(
    stage: _StageRun, run_log: _RunLog, entry: ModelEntry, tasks: list[str], exc: Exception
) -> list[dict]:
    """Log a model that did not load; its tasks' ``unavailable`` summary rows."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.warning("%s: not run (%s)", entry.id, reason)
    run_log.write(
        "load_failed",
        {
            "error": short_error(exc),
            "error_type": type(exc).__name__,
            "requested_decoding": stage.config.path,
            "versions": versions(),
        },
    )
    rows = []
    for task in tasks:
        file = shard_path(stage.ws.inference_jsonl(entry.id, task), stage.plan.shard)
        rows.append(
            {
                "model": entry.id,
                "task": task,
                "status": "unavailable",
                "error": reason,
                "file": str(file),
            }
        )
    return rows


def _decode_families(
    stage: _StageRun,
    setup: _ModelSetup,
    recogniser: Recogniser,
    run_log: _RunLog,
    plans: dict[str, dict],
    tasks: list[str],
) -> list[dict]:
    """Decode every family's pending stimuli with the loaded model, then close it and log the run
    (also when decoding fails); the tasks' summary rows."""
    entry = setup.entry
    batch = int(
        setup.batch_size or getattr(recogniser, "batch_size", None) or entry.batch_size or 1
    )
    model = _LoadedModel(entry, recogniser, batch)
    meter = Throughput(entry.id)
    task_stats: dict[str, dict] = {}
    info: dict = {}
    try:
        info = _model_info(recogniser)
        for family, fplan in plans.items():
            task_stats.update(_run_family(stage, model, meter, family, fplan))
        rows = [{"model": entry.id, "task": task, **task_stats[task]} for task in tasks]
        if stage.config.progress and meter.families:
            note(meter.line())
    finally:
        stage.diag.flush()
        end_stats = _end_stats(recogniser)
        recogniser.close()
        run_log.write("run", _run_fields(stage, setup, info, end_stats, task_stats, meter))
    return rows


def _model_info(recogniser: Recogniser) -> dict:
    """The recogniser's :meth:`info`, or the error it raised."""
    try:
        return recogniser.info()
    except Exception as exc:  # noqa: BLE001
        return {"info_error": short_error(exc)}


def _end_stats(recogniser: Recogniser) -> dict | None:
    """Throughput, RTFx and peak GPU memory, where the backend measures them."""
    if not hasattr(recogniser, "stats"):
        return None
    try:
        return recogniser.stats()
    except Exception as exc:  # noqa: BLE001 - diagnostics must not hide the run's result
        return {"stats_error": f"{type(exc).__name__}: {exc}"[:200]}


def _run_fields(
    stage: _StageRun,
    setup: _ModelSetup,
    info: dict,
    end_stats: dict | None,
    task_stats: dict[str, dict],
    meter: Throughput,
) -> dict:
    """The fields of a ``run`` record of ``run_log.jsonl``."""
    entry = setup.entry
    config = stage.config
    n_errors = sum(s.get("n_errors", 0) for s in task_stats.values())
    return {
        "decoding": info.get("path", config.path),
        "window": info.get("window"),
        # the window policy: part of every resume key
        "decoding_key": models.decoding_key(entry, config.path),
        "revision": info.get("revision", entry.revision),
        "revision_requested": entry.revision,
        "stats": end_stats,
        "weights": info.get("weights_path", entry.weights),
        "weights_sha256": info.get("weights_sha256"),
        "batch_size": setup.batch_size,
        "attn_implementation": setup.attn_implementation,
        "limit": config.limit,
        # the seed of the limit's stratified sample (None without a limit)
        "limit_seed": LIMIT_SEED if config.limit else None,
        "n_done": sum(s.get("n_run", 0) for s in task_stats.values()) - n_errors,
        "n_errors": n_errors,
        "tasks": task_stats,
        "throughput": meter.record(),
        "info": info,
        "versions": versions(),
    }


@dataclasses.dataclass
class _TaskTally:
    """One task's counts over a family's loop: errors, its share of the loop's wall time and its own
    time inside ``generate`` (seconds)."""

    n_errors: int = 0
    seconds: float = 0.0
    decode_seconds: float = 0.0


def _run_family(
    stage: _StageRun, model: _LoadedModel, meter: Throughput, family: str, fplan: dict
) -> dict:
    """Decode one task family's pending stimuli with every task's prompt, batch by batch.

    Per task, ``seconds`` is its share of the loop's wall time (each batch's interval split evenly
    over the decodes made in it) and ``decode_seconds`` its own time inside ``generate``.
    """
    if "manifest" not in fplan:
        return fplan["result"]
    need = set().union(*fplan["todo"].values())
    records = [r for r in fplan["manifest"].to_dict("records") if r["id"] in need]
    batches = [records[k : k + model.batch_size] for k in range(0, len(records), model.batch_size)]
    max_samples = int(round(float(model.entry.max_audio_s) * SR))
    tallies = {t: _TaskTally() for t in fplan["paths"]}
    fam_audio_s = 0.0
    fam_decodes = 0
    bar = _family_bar(stage, model.entry, fplan["paths"], len(records))
    loop_t0 = t_prev = time.perf_counter()
    # the next batch is mixed in a thread while this one is decoded (numpy/scipy release the GIL)
    mixer = ThreadPoolExecutor(1, thread_name_prefix="aip-mix")
    try:
        ahead = _mix_ahead(mixer, batches, 0, stage.ws, max_samples)
        for k, batch in enumerate(batches):
            done = ahead.result()  # (record, audio or None, MixInfo or None, error or None)
            ahead = _mix_ahead(mixer, batches, k + 1, stage.ws, max_samples)
            fam_audio_s = _add_diagnostics(stage.diag, done, family, fam_audio_s)
            n_dec = {}
            for t in fplan["paths"]:
                n_dec[t] = _decode_task(stage, model, fplan, t, done, tallies[t])
            t_now = time.perf_counter()
            n_batch = sum(n_dec.values())
            for t, n in n_dec.items():
                tallies[t].seconds += (t_now - t_prev) * n / n_batch if n_batch else 0.0
            t_prev = t_now
            fam_decodes = fam_decodes + n_batch
            bar.update(len(batch))
    finally:
        mixer.shutdown(wait=True, cancel_futures=True)
        bar.close()
    meter.add(
        family=family,
        stimuli=len(records),
        decodes=fam_decodes,
        audio_s=fam_audio_s,
        seconds=time.perf_counter() - loop_t0,
    )
    return {t: _task_result(fplan, t, tallies[t]) for t in fplan["paths"]}


def _family_bar(stage: _StageRun, entry: ModelEntry, paths: dict, n_records: int) -> Progress:
    """The progress bar of one family's loop (off without ``progress`` or records)."""
    shard = stage.plan.shard
    where = f" · shard {shard_label(shard)}" if shard is not None else ""
    return Progress(
        n_records,
        f"{entry.id} · {'+'.join(paths)}{where}",
        unit="stim",
        enabled=bool(stage.config.progress and n_records),
    )


def _mix_ahead(mixer: ThreadPoolExecutor, batches: list, k: int, ws: Workspace, max_samples: int):
    """Start mixing batch ``k`` in ``mixer`` (a future of :func:`mix_batch`); None past the last."""
    if k >= len(batches):
        return None
    return mixer.submit(mix_batch, batches[k], ws, max_samples)


def _add_diagnostics(diag: MixDiagnostics, done: list[tuple], family: str, audio_s: float) -> float:
    """Record the mix diagnostics of a batch's materialised stimuli; ``audio_s`` plus their audio,
    seconds."""
    for r, y, info, err in done:
        if err is None:
            diag.add(r, family, info)
            audio_s += len(y) / SR
    diag.flush()
    return audio_s


def _decode_task(
    stage: _StageRun, model: _LoadedModel, fplan: dict, task: str, done: list, tally: _TaskTally
) -> int:
    """Decode a batch's stimuli pending for ``task`` and append their rows; the rows written."""
    todo = fplan["todo"][task]
    rows = []
    ok_rows = []
    ok_audio = []
    for r, y, _, err in done:
        if r["id"] not in todo:
            continue
        row = _pending_row(stage, model, fplan, task, r, y, err)
        rows.append(row)
        if err is None:
            ok_rows.append(row)
            ok_audio.append(y)
    if ok_rows:
        prompt = fplan["prompts"][task][1] if getattr(model.entry, "takes_prompt", True) else None
        t0 = time.perf_counter()
        generate_into(model.recogniser, ok_rows, ok_audio, prompt)
        tally.decode_seconds += time.perf_counter() - t0
    tally.n_errors += sum(row["error"] is not None for row in rows)
    lines = [inference_row_json(output_row(row)) for row in rows]
    append_jsonl_lines(fplan["paths"][task], lines)
    return len(rows)


def _pending_row(
    stage: _StageRun, model: _LoadedModel, fplan: dict, task: str, r: dict, y, err
) -> dict:
    """The work row of one stimulus (:func:`aiplib.inference.batch_decode.output_row`), its answer
    still an error until :func:`generate_into` fills it."""
    window_of = getattr(model.recogniser, "window_s", None)
    return {
        "manifest": r,
        "raw": ERROR_RESPONSE,
        "model": model.entry.id,
        "task": task,
        "error": err,
        "prompt_set": stage.plan.prompt_set.name,
        "prompt_id": fplan["prompts"][task][0],
        "stim_key": fplan["keys"][task][r["id"]],
        "decode_s": None,
        "batch_size": None,
        "audio_s": None if y is None else round(len(y) / SR, 4),
        "window_s": window_of(len(y)) if window_of and y is not None else None,
    }


def _task_result(fplan: dict, task: str, tally: _TaskTally) -> dict:
    """One task's summary row after its family's loop."""
    manifest = fplan["manifest"]
    todo = fplan["todo"][task]
    stimuli_per_s = None
    if todo and tally.seconds > 0:
        stimuli_per_s = round(len(todo) / tally.seconds, 3)
    return {
        "status": "done",
        "n_stimuli": len(manifest),
        "n_done_before": len(manifest) - len(todo),
        "n_run": len(todo),
        "n_errors": tally.n_errors,
        "seconds": round(tally.seconds, 3),
        "decode_seconds": round(tally.decode_seconds, 3),
        "stimuli_per_s": stimuli_per_s,
        "manifest_sha256": fplan["m_sha"],
        "error": None,
        "file": str(fplan["paths"][task]),
    }


def raise_if_not_run(summary: pd.DataFrame) -> None:
    """Raise :class:`ModelUnavailableError` when a row of :func:`run_inference`'s ``summary`` is
    neither ``done`` nor ``not_applicable``: one line (the last line of a failed stage shows it
    whole), ``not run: <model> / <task>: <status> — <reason>; …`` for each model and task."""
    bad = summary[~summary["status"].isin(["done", "not_applicable"])]
    if len(bad):
        parts = [f"{r.model} / {r.task}: {r.status} — {r.error}" for r in bad.itertuples()]
        one_line = [" ".join(str(p).split()) for p in _unique_in_order(parts)]
        raise ModelUnavailableError("not run: " + "; ".join(one_line))
