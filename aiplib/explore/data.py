"""Notebook 10, data side: what the explorer shows (tables, lookups, a stimulus's signals, WAV
bytes).

Reads the workspace, writes nothing, no widget or plotting code. The numbers come from the stages'
own functions: stage 8's row scorers, the report's ``worst_stimuli``, Figure 4's
``background_ranking`` and ``mix_components``, which rebuilds each stimulus from its manifest row.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
from itertools import zip_longest
from pathlib import Path

import jiwer
import numpy as np
import pandas as pd
from scipy.io import wavfile

from aiplib.analysis.conditions import condition_label
from aiplib.analysis.paper import background_ranking
from aiplib.analysis.stats import degradation_by_background, worst_stimuli
from aiplib.battery.descriptors import DESCRIPTOR_INFO
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import (
    BASE_TASKS,
    CONDITION_FAMILIES,
    DEFAULT_SUITE,
    TASK_FAMILIES,
    TaskFamily,
    check_family,
    task_family,
)
from aiplib.core.textnorm import normalize_text, score_asr_row, score_kws_row
from aiplib.inference.shards import is_shard_file
from aiplib.io import formats
from aiplib.io.audio import SR, valid_audio
from aiplib.stimuli.families import materialize, mix_components, row_family
from aiplib.stimuli.mixing import is_clean_row


def _scored_text(score_row) -> str:
    """The answer a score row was scored on: ``response_scored`` (stage 8's ``response_cleanup``
    applied) where the scores have it, else ``response`` as generated."""
    scored = score_row.get("response_scored")
    if scored is not None and not (isinstance(scored, float) and math.isnan(scored)):
        return str(scored)
    return str(score_row.get("response", ""))


@functools.lru_cache(maxsize=64)
def _read(path: str, kind: str, stamp: tuple) -> pd.DataFrame:
    """A score file, an inference file or the manifest of family ``kind``, cached per (mtime, size)
    ``stamp``."""
    if kind == "scores":
        return formats.read_scores(path)
    if kind == "results":
        return formats.read_results(path).set_index("id", drop=False)
    raw = (
        formats.read_manifest_csv(path)
        .drop_duplicates("id", keep="last")
        .set_index("id", drop=False)
    )
    view = formats.manifest_view(raw, kind)
    for c in ("stimulus_id", "item_id", "bg_id", "snr_db", "reference"):
        raw[c] = view[c].reindex(raw.index)
    raw.index.name = "stimulus_id"
    return raw


def _cached(path: Path, kind: str) -> pd.DataFrame | None:
    p = Path(path)
    if not p.is_file():
        return None
    st = p.stat()
    return _read(str(path), kind, (st.st_mtime_ns, st.st_size))


def manifest(ws, family: str) -> pd.DataFrame | None:
    """The manifest of ``family`` in ``ws``'s condition family (None if missing), indexed by
    stimulus id, with scoring's names added: ``stimulus_id, item_id, bg_id`` ("clean" on clean
    rows), ``snr_db`` (dB, NaN on clean rows), ``reference`` (transcript or keyword)."""
    return _cached(ws.manifest_csv(family), family)


def _scores(ws, task: str) -> pd.DataFrame | None:
    df = _cached(ws.scores_csv(task), "scores")
    return None if df is None or df.empty or "stimulus_id" not in df.columns else df


def _need_manifest(ws, family: str) -> pd.DataFrame:
    m = manifest(ws, family)
    if m is None:
        raise FileNotFoundError(
            f"{ws.manifest_csv(family)}: manifest not found; run stage 05_build_manifests first"
        )
    return m


# ------------------------------------------------------------------------------------ what exists
def available_families(ws) -> list[str]:
    """Condition families with a manifest, in :data:`aiplib.core.tasks.CONDITION_FAMILIES` order."""
    return [
        cf
        for cf in CONDITION_FAMILIES
        if any(ws.with_family(cf).manifest_csv(f).is_file() for f in TASK_FAMILIES)
    ]


def available_tasks(ws) -> list[str]:
    """``asr`` / ``kws`` when their manifest exists, then (sorted) the other tasks of those families
    in ``inference/*/<task>.jsonl`` or ``results/scores/<task>.csv``."""
    fams = [f for f in TASK_FAMILIES if ws.manifest_csv(f).is_file()]
    found = {
        p.stem
        for p in Path(ws.inference).glob("*/*.jsonl")
        if p.stem != "run_log" and not is_shard_file(p)
    }
    found |= {p.stem for p in ws.scores_dir.glob("*.csv")}
    return fams + [t for t in sorted(found - set(BASE_TASKS.values())) if _family(t) in fams]


def _family(task: str) -> str | None:
    try:
        return task_family(task)
    except AiplibParameterError:
        return None


def available_models(ws, task: str) -> list[str]:
    """Models with results for ``task`` (``inference/<model>/<task>.jsonl`` or named in the score
    file), sorted; empty before inference."""
    models = {p.parent.name for p in Path(ws.inference).glob(f"*/{task}.jsonl")}
    sc = _scores(ws, task)
    if sc is not None and "model" in sc.columns:
        models |= set(sc["model"].astype(str))
    return sorted(models)


def most_complete_model(ws, task: str, models: list[str] | None = None) -> str | None:
    """The model the explorer opens on for ``task``: of ``models`` (default
    :func:`available_models`), the one with the most rows scored for it (``results/scores``),
    else with the most rows in ``inference/<model>/<task>.jsonl``; ties go to the first by name.
    None when there is no model. A 5-row partial run never hides a complete one."""
    models = available_models(ws, task) if models is None else list(models)
    if not models:
        return None
    sc = _scores(ws, task)
    counts = {m: 0 for m in models}
    if sc is not None and "model" in sc.columns:
        scored = sc["model"].astype(str).value_counts()
        counts = {m: int(scored.get(m, 0)) for m in models}
    for m in models:
        p = Path(ws.inference) / m / f"{task}.jsonl"
        if counts[m] == 0 and p.is_file():
            counts[m] = p.read_bytes().count(b"\n")
    best = sorted(models)[0]
    for m in sorted(models):
        if counts[m] > counts[best]:
            best = m
    return best


# ----------------------------------------------------------------------------------------- results
def _nan(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


#: Per-row counts an error-rate score row carries beside its measure (S, D, I and the reference
#: words the rate is over).
_ERROR_COUNTS = ("substitutions", "deletions", "insertions", "ref_words")


def _unknown_error_rate(spec: TaskFamily) -> dict:
    """The error-rate fields of :func:`lookup_response` before a score is found."""
    out = {spec.measure: math.nan, f"clean_{spec.measure}": math.nan}
    out[spec.degradation_column] = math.nan
    for k in _ERROR_COUNTS:
        out[k] = math.nan
    out["is_loop"] = None
    return out


def _unknown_binary(spec: TaskFamily) -> dict:
    """The binary (keyword) fields of :func:`lookup_response` before a score is found."""
    out = {"first_word": None, spec.measure: None, f"clean_{spec.measure}": None}
    out[spec.degradation_column] = math.nan
    return out


def _fill_error_rate(out: dict, spec: TaskFamily, r, c) -> None:
    """Copy an error-rate score row ``r`` and its clean row ``c`` (None when missing)."""
    if r is not None:
        for k in (spec.measure, *_ERROR_COUNTS):
            out[k] = _nan(r.get(k))
        loop = formats.parse_bool(r.get("is_loop"))
        if loop is pd.NA:
            out["is_loop"] = None
        else:
            out["is_loop"] = loop
    if c is not None:
        out[f"clean_{spec.measure}"] = _nan(c.get(spec.measure))


def _fill_binary(out: dict, spec: TaskFamily, r, c) -> None:
    """Copy a binary (keyword) score row ``r`` and its clean row ``c`` (None when missing)."""
    if r is not None:
        out["first_word"] = str(r.get("first_word", ""))
        out[spec.measure] = bool(_nan(r.get(spec.measure)) == 1)
    if c is not None:
        out[f"clean_{spec.measure}"] = bool(_nan(c.get(spec.measure)) == 1)


def _score_wer(reference: str, text: str, is_target: bool) -> dict:
    """Stage 8's ASR row score of one response."""
    return score_asr_row(reference, text)


def _score_first_word(reference: str, text: str, is_target: bool) -> dict:
    """Stage 8's keyword row score of one response (its first word against the label)."""
    return score_kws_row(text, reference, is_target)


#: What :func:`lookup_response` fills per ``TaskFamily.measure_kind``: the fields before a score is
#: found, and how a score row and its clean row are copied in.
_BY_KIND = {
    "error_rate": (_unknown_error_rate, _fill_error_rate),
    "binary": (_unknown_binary, _fill_binary),
}

#: Stage 8's row scorer per ``TaskFamily.scoring`` name (reference, response, is_target → dict).
_ROW_SCORERS = {"wer": _score_wer, "kws_first_word": _score_first_word}


def _fill(out: dict, spec: TaskFamily, r, c) -> None:
    """Copy a score row ``r`` and its clean row ``c`` (None when missing) into
    :func:`lookup_response`'s ``out``."""
    fill = _BY_KIND[spec.measure_kind][1]
    fill(out, spec, r, c)


def _degradation(out: dict, spec: TaskFamily) -> float:
    """The pair's degradation from the filled clean and noisy measures (NaN when one is
    missing)."""
    clean = out[f"clean_{spec.measure}"]
    noisy = out[spec.measure]
    if clean is None or noisy is None:
        return math.nan
    return float(spec.degradation(clean, noisy))


def lookup_response(ws, model: str, task: str, stimulus_id: str) -> dict:
    """What ``model`` (an ``inference/`` folder) answered for one stimulus of ``task``, with its
    score and the clean comparison: from ``results/scores/<task>.csv`` when it holds the stimulus,
    else from ``inference/<model>/<task>.jsonl`` scored here with stage 8's row functions.

    Returns ``found``, ``source`` (``"scores"``, ``"inference"`` or None), ``model, task, family,
    stimulus_id, item_id, bg_id``, ``snr_db`` (dB, NaN for clean), ``reference``, ``response``
    (``"__ERROR__"`` for a failed generation), ``error``, ``clean_response`` (None when missing);
    ASR ``wer, clean_wer, delta_wer, substitutions, deletions, insertions, ref_words`` (NaN when
    unknown), ``is_loop``; KWS ``first_word, correct, clean_correct`` (bool or None), ``delta_acc``
    = correct(clean) − correct(noisy).

    Raises
    ------
    FileNotFoundError
        If the family's manifest is missing.
    AiplibParameterError
        If ``stimulus_id`` is not in the manifest or the task name is unknown.
    """
    fam = task_family(task)
    spec = TASK_FAMILIES[fam]
    man = _need_manifest(ws, fam)
    if stimulus_id not in man.index:
        raise AiplibParameterError(f"stimulus {stimulus_id!r} is not in manifests/{fam}.csv")
    mrow = man.loc[stimulus_id]
    out = _blank_result(man, mrow, spec, model=model, task=task, stimulus_id=stimulus_id)
    clean_id = _clean_id(man, out["item_id"])
    if model and _fill_from_scores(out, ws, spec, clean_id):
        return out
    if model:
        _fill_from_inference(out, ws, spec, clean_id, is_target=bool(mrow.get("is_target", True)))
    return out


def _clean_id(man: pd.DataFrame, item_id: str) -> str:
    """The stimulus id of the item's clean row (``<item>_clean`` when the manifest has none)."""
    is_clean = (man["item_id"] == item_id) & (man["bg_id"] == "clean")
    if is_clean.any():
        return str(man.index[is_clean][0])
    return f"{item_id}_clean"


def _blank_result(man, mrow, spec: TaskFamily, *, model, task, stimulus_id) -> dict:
    """:func:`lookup_response`'s result before a response is found."""
    out = dict(
        found=False,
        source=None,
        model=model,
        task=task,
        family=spec.name,
        stimulus_id=stimulus_id,
        item_id=str(mrow["item_id"]),
        bg_id=str(mrow["bg_id"]),
        snr_db=_nan(mrow["snr_db"]),
        reference=str(mrow["reference"]),
        response=None,
        error=None,
        clean_response=None,
    )
    unknown = _BY_KIND[spec.measure_kind][0]
    out.update(unknown(spec))
    return out


def _fill_from_scores(out: dict, ws, spec: TaskFamily, clean_id: str) -> bool:
    """Fill ``out`` from ``results/scores/<task>.csv``; False when it lacks the stimulus."""
    sc = _scores(ws, out["task"])
    if sc is None:
        return False
    stimulus_id = out["stimulus_id"]
    picked = (sc["model"].astype(str) == out["model"]) & sc["stimulus_id"].isin(
        [stimulus_id, clean_id]
    )
    sub = sc[picked].drop_duplicates("stimulus_id", keep="last").set_index("stimulus_id")
    if stimulus_id not in sub.index:
        return False
    r = sub.loc[stimulus_id]
    c = None
    clean_text = None
    if clean_id in sub.index:
        c = sub.loc[clean_id]
        # the text that was scored (after stage 8's response_cleanup, when one was applied)
        clean_text = _scored_text(c)
    out.update(found=True, source="scores", response=_scored_text(r), clean_response=clean_text)
    _fill(out, spec, r, c)
    delta = spec.degradation_column
    if out["bg_id"] != "clean":
        out[delta] = _nan(r.get(delta))
    else:
        out[delta] = math.nan
    return True


def _fill_from_inference(out: dict, ws, spec: TaskFamily, clean_id: str, *, is_target: bool):
    """Fill ``out`` from ``inference/<model>/<task>.jsonl``, scored here with stage 8's row
    functions; unchanged when the file lacks the stimulus."""
    res = _cached(ws.inference_jsonl(out["model"], out["task"]), "results")
    stimulus_id = out["stimulus_id"]
    if res is None or stimulus_id not in res.index:
        return
    r = res.loc[stimulus_id]
    c = None
    if clean_id in res.index:
        c = res.loc[clean_id]
    c_ok = c is not None and not formats.is_error_row(c)
    error = None
    if not (pd.isna(r["error"]) or r["error"] == ""):
        error = str(r["error"])
    clean_response = None
    if c_ok:
        clean_response = str(c["raw"])
    out.update(
        found=True,
        source="inference",
        response=str(r["raw"]),
        clean_response=clean_response,
        error=error,
    )
    score = _ROW_SCORERS[spec.scoring]
    scored = None
    if not formats.is_error_row(r):
        scored = score(out["reference"], out["response"], is_target)
    clean_scored = None
    if c_ok:
        clean_scored = score(out["reference"], out["clean_response"], is_target)
    _fill(out, spec, scored, clean_scored)
    if out["bg_id"] != "clean":
        out[spec.degradation_column] = _degradation(out, spec)


def word_diff(reference: str, response: str) -> list[tuple[str, str, str]]:
    """Word-level alignment of a response against its reference, as WER counts it: both raw texts
    (``None`` is empty) normalised by :func:`aiplib.core.textnorm.normalize_text`, aligned by
    ``jiwer.process_words``: ``(op, ref_word, hyp_word)`` tuples, ``op`` one of ``"equal"``,
    ``"substitute"``, ``"delete"`` (``hyp_word`` "") or ``"insert"`` (``ref_word`` ""), counted as
    the row's hits, S, D and I."""
    r, h = normalize_text(reference).split(), normalize_text(response).split()
    if not r or not h:
        return [("delete", w, "") for w in r] + [("insert", "", w) for w in h]
    return [
        (ch.type, a, b)
        for ch in jiwer.process_words(" ".join(r), " ".join(h)).alignments[0]
        for a, b in zip_longest(
            r[ch.ref_start_idx : ch.ref_end_idx], h[ch.hyp_start_idx : ch.hyp_end_idx], fillvalue=""
        )
    ]


#: Columns of the worst-stimuli table, in order.
WORST_COLUMNS = [
    "model",
    "task",
    "stimulus_id",
    "item_id",
    "bg_id",
    "snr_db",
    "condition",
    "reference",
    "response",
    "score",
    "delta",
]


def worst_cases(
    ws, task: str, n: int = 10, *, model: str | None = None, one_per_item: bool = True
) -> pd.DataFrame:
    """The stimuli that hurt most in ``ws``'s ``results/scores/<task>.csv``: the report's ranking
    (:func:`aiplib.analysis.stats.worst_stimuli`, same ``n``, ``model``, ``one_per_item``), shape
    (<= n, 11):
    :data:`WORST_COLUMNS`; ``condition`` is ``"bg03 @ 0 dB"`` (the channel family: the condition's
      name
    alone, its manifest SNR 99 is a marker), ``score`` the WER or correct (0/1), ``delta`` the ΔWER
    or Δacc = 1 (a flip). Empty before scores exist.

    Raises
    ------
    AiplibParameterError
        If ``n < 1`` or the task name is unknown.
    """
    w = worst_stimuli(
        _scores(ws, task), task_family(task), n, model=model, one_per_item=one_per_item
    )
    w["task"] = task
    cf = getattr(ws, "condition_family", DEFAULT_SUITE[0])
    w["condition"] = condition_names(cf, w["bg_id"], w["snr_db"])
    return w[WORST_COLUMNS]


def condition_names(cf: str, bg_ids, snrs) -> list[str]:
    """``"bg03 @ 0 dB"`` per row (:func:`aiplib.analysis.conditions.condition_label`); the
    condition's name alone in a family without an SNR (``CONDITION_FAMILIES[cf].has_snr``: its
    manifest SNR is a marker)."""
    if not CONDITION_FAMILIES[cf].has_snr:
        return [str(b) for b in bg_ids]
    return [condition_label(b, s) for b, s in zip(bg_ids, snrs)]


# ------------------------------------------------------------------------------------- backgrounds
def descriptor_label(name: str) -> tuple[str, str]:
    """Readable name and unit of a descriptor: ``("centroid", "Hz")``, from
    :data:`aiplib.battery.descriptors.DESCRIPTOR_INFO` without the unit's parenthesised remark."""
    unit = DESCRIPTOR_INFO.get(name, ("",))[0].split(" (")[0]
    label = {"zcr": "zero-crossing rate", "vad_speech_fraction": "speech (VAD)"}.get(
        name, name.replace("spectral_", "").replace("_", " ")
    )
    return label, unit


def summarise_sources(source_file) -> str:
    """``"57 files: bg/src/a.wav, …"`` for a battery's ``;``-joined ``source_file`` (one: the
    path)."""
    files = [f for f in str(source_file or "").split(";") if f]
    return f"{len(files)} files: {files[0]}, …" if len(files) > 1 else "".join(files)


def _pooled_pp(sc: pd.DataFrame, task: str, *, only_task: bool = False) -> pd.Series:
    """Degradation per background pooled over models, pp, named as Figure 4's columns
    (``asr_delta_wer_pp``)."""
    fam = task_family(task)
    deg = degradation_by_background(sc, fam, task=task if only_task else None)
    return (deg["pooled"] * 100).rename(f"{task}_{TASK_FAMILIES[fam].degradation_column}_pp")


def _ranking(ws) -> pd.DataFrame:
    """Figure 4's ranking when ASR and KWS are scored; else the one family's pooled degradation."""
    scores = {}
    for t in BASE_TASKS.values():
        sc = _scores(ws, t)
        if sc is not None:
            scores[t] = sc
    if len(scores) == len(BASE_TASKS):
        degradations = [
            f"{fam}_{spec.degradation_column}_pp" for fam, spec in TASK_FAMILIES.items()
        ]
        return background_ranking(scores)[["rank", "mean_degradation_pp", *degradations]]
    if not scores:
        return pd.DataFrame(columns=["rank"])
    ((task, sc),) = scores.items()
    t = (
        _pooled_pp(sc, task)
        .sort_values(ascending=False, kind="stable", na_position="last")
        .to_frame()
    )
    t.insert(0, "rank", np.arange(1, len(t) + 1))
    return t


def _manifest_backgrounds(ws) -> pd.DataFrame:
    """No battery table: the backgrounds the manifests name, as an empty frame indexed by
    ``bg_id``."""
    ids = set()
    for fam in TASK_FAMILIES:
        m = manifest(ws, fam)
        if m is not None:
            ids |= set(m.loc[m["bg_id"] != "clean", "bg_id"])
    return pd.DataFrame(index=pd.Index(sorted(ids), name="bg_id"))


def background_table(ws) -> pd.DataFrame:
    """All backgrounds with licence, source, descriptors and degradation, in Figure 4 order, from
    ``ws``'s battery, descriptor table and score files (each when it exists); unranked backgrounds
    last.

    Index ``bg_id``; columns ``category, description, licence, source_package, source_file,
    attribution`` ("" when missing), ``sources`` (:func:`summarise_sources`), the descriptors (NaN
    before stage 4), ``rank`` (1 = most harmful), ``mean_degradation_pp`` (ASR and KWS scored),
    ``<task>_delta_wer_pp`` / ``<task>_delta_acc_pp`` of every scored task (pooled over models, pp).
    """
    bat = formats.read_battery_csv(ws.battery_csv, index=True)
    if bat is None:
        bat = _manifest_backgrounds(ws)
    table = pd.DataFrame(index=pd.Index(bat.index.astype(str), name="bg_id"))
    for c in ("category", "description", "licence", "source_package", "source_file", "attribution"):
        table[c] = bat[c] if c in bat.columns else ""
    table["sources"] = table["source_file"].map(summarise_sources)
    desc = formats.read_descriptor_table(ws.descriptor_csv, index=True)
    for c in formats.DESCRIPTORS:
        table[c] = (
            desc[c].reindex(table.index).astype(float) if desc is not None and c in desc else np.nan
        )
    rank = _ranking(ws)
    table = table.join(rank)
    for task in available_tasks(ws):
        if task in BASE_TASKS.values():
            continue
        sc = _scores(ws, task)
        if sc is not None:
            deg = _pooled_pp(sc, task, only_task=True)
            table[deg.name] = deg.reindex(table.index)
    order = list(rank.index.intersection(table.index)) + [
        b for b in table.index if b not in rank.index
    ]
    return table.loc[order]


# ------------------------------------------------------------------------------------------- audio
#: The players' WAV: 32-bit IEEE float, the float32 samples the model was given.
AUDIO_SUBTYPE = "FLOAT"

#: Titles of the three players (clean, middle, mixture) per condition family; stimulus_labels
#: adds details.
PLAYER_LABELS = {
    "background": (
        "Clean utterance",
        "Background segment (as mixed)",
        "Mixture (what the model heard)",
    ),
    "competing_speech": (
        "Clean target",
        "Distractor (as mixed)",
        "Mixture: target + distractor (what the model heard)",
    ),
    "channel": (
        "Clean utterance",
        "The transform's change (transformed − clean)",
        "Transformed speech (what the model heard)",
    ),
}


def manifest_row(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The manifest row of one stimulus in ``ws``'s condition family (:func:`manifest`'s columns).

    ``family`` is ``"asr"`` or ``"kws"``; ``bg_id`` the row's ``background_id`` (a background, a
    distractor condition ``talker_fr``, a channel condition ``telephone``, or ``"clean"``);
    ``snr_db`` in dB, ignored for clean, may be None when the condition has one row per item.

    Raises
    ------
    FileNotFoundError
        If the manifest does not exist (run stage 5).
    AiplibParameterError
        If no row matches (the message lists the valid values).
    """
    m = _need_manifest(ws, family)
    sel = m[(m["item_id"] == str(item_id)) & (m["bg_id"] == str(bg_id))]
    if sel.empty:
        items, bgs = sorted(m["item_id"].unique()), sorted(m["bg_id"].unique())
        raise AiplibParameterError(
            f"no {family} stimulus for item {item_id!r}, background {bg_id!r}; "
            f"items: {', '.join(items[:10])}{' …' if len(items) > 10 else ''}; "
            f"backgrounds: {', '.join(bgs)}"
        )
    if bg_id != "clean" and not (snr_db is None and len(sel) == 1):
        if snr_db is None:
            raise AiplibParameterError(f"snr_db is required for background {bg_id!r}")
        hit = sel[np.isclose(sel["snr_db"].astype(float), float(snr_db))]
        if hit.empty:
            raise AiplibParameterError(
                f"no {family} stimulus for item {item_id!r}, background {bg_id!r} "
                f"at {snr_db} dB; SNRs: {sorted(sel['snr_db'].astype(float).unique())}"
            )
        sel = hit
    return sel.iloc[0].to_dict()


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v).strip()


def stimulus_labels(row, *, middle: bool = True) -> dict:
    """What the three players of a manifest row hold: a dict with ``condition_family``, the titles
    ``clean``, ``background``, ``mixture`` (:data:`PLAYER_LABELS` naming the distractor or channel
    condition) and ``notes``, (name, text) details of a competing-speech or channel row. ``middle``
    is False when a channel transform changed the length (no middle signal; its title says why).

    Raises
    ------
    AiplibParameterError
        An unknown ``condition_family``.
    """
    cf = check_family(row_family(row))
    out = dict(
        condition_family=cf,
        **dict(zip(("clean", "background", "mixture"), PLAYER_LABELS[cf])),
        notes=[],
    )
    details = _DETAIL_LABELS[cf]
    if is_clean_row(row) or details is None:
        return out
    details(out, row, middle=middle)
    return out


def _competing_labels(out: dict, row, *, middle: bool) -> None:
    """The distractor's title and notes of a competing-speech row."""
    name = _text(row.get("background_id"))
    langs = _text(row.get("distractor_languages"))
    setting = _text(row.get("setting"))
    same = formats.parse_bool(row.get("same_voice_as_target")) is True
    if same:
        same_voice = "; same voice as the target"
        same_note = "yes: a same-voice, other-language control"
    else:
        same_voice = ""
        same_note = "no"
    out["background"] = (
        f"Distractor: {langs or name} ({setting or 'distractor'}{same_voice}), as mixed"
    )
    out["notes"] = [
        ("setting", setting),
        ("languages", langs),
        ("same voice as the target", same_note),
        ("distractor transcript", _text(row.get("distractor_text"))),
        ("distractor utterances", _text(row.get("distractor_ids")).replace("|", ", ")),
        ("looped", _text(row.get("looped"))),
    ]


def _channel_labels(out: dict, row, *, middle: bool) -> None:
    """The transform's titles and notes of a channel row (no middle signal when the length
    changed)."""
    raw = _text(row.get("condition_params"))
    try:
        params = json.loads(raw) if raw else {}
    except ValueError:
        params = {"condition_params": raw}
    name = _text(row.get("channel_condition")) or _text(row.get("background_id"))
    out["mixture"] = f"Transformed speech: {name} (what the model heard)"
    if not middle:
        out["background"] = f"No difference signal: {name} changes the length (parameters below)"
    out["notes"] = [
        ("condition", name),
        ("applied to", _text(row.get("applied_to")) or "speech"),
        ("parameters", ", ".join(f"{k} = {v}" for k, v in sorted(params.items())) or "none"),
    ]


#: The titles and notes :func:`stimulus_labels` adds to a noisy row, per condition family (None:
#: the player titles alone).
_DETAIL_LABELS = {
    "background": None,
    "competing_speech": _competing_labels,
    "channel": _channel_labels,
}


def stimulus_audio(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The three signals of one stimulus (arguments as :func:`manifest_row`), mixed on the fly.

    Returns ``row``, ``stimulus_id``, ``sr`` (16000 Hz), ``condition_family``, ``mixture`` (float32,
    shape (n,), exactly ``materialize(row, ws)[0]``), ``clean`` (float32, shape (m,); ``m = n``
    except after a channel cut), ``background`` (float32, shape (n,), the middle signal as mixed:
    background segment, scaled distractor or ``mixture − speech`` of a channel transform; None for
    clean and when the length changed), ``info`` (:class:`~aiplib.stimuli.mixing.MixInfo`),
    ``detail``, ``labels`` (:func:`stimulus_labels`).

    Raises
    ------
    FileNotFoundError, AiplibParameterError
        As :func:`manifest_row`.
    AudioFileError
        If a speech, background or distractor file is missing or unreadable.
    """
    row = manifest_row(ws, family, item_id, bg_id, snr_db)
    parts = mix_components(row, ws)
    clean = (
        parts["mixture"]
        if bg_id == "clean"
        else materialize(manifest_row(ws, family, item_id, "clean"), ws)[0]
    )
    middle = bg_id != "clean" and parts["background"].shape == parts["mixture"].shape == clean.shape
    return dict(
        row=row,
        stimulus_id=str(row["stimulus_id"]),
        sr=SR,
        condition_family=ws.condition_family,
        mixture=parts["mixture"],
        clean=clean,
        background=parts["background"] if middle else None,
        info=parts["info"],
        detail=parts.get("detail"),
        labels=stimulus_labels(row, middle=middle or bg_id == "clean"),
    )


def wav_bytes(y, *, sr: int = SR, subtype: str = AUDIO_SUBTYPE) -> bytes:
    """Mono WAV bytes of ``y`` [shape=(n,)] at ``sr`` Hz (``scipy.io.wavfile.write``: no time stamp,
    so the same samples give the same bytes).

    ``subtype`` ``"FLOAT"``: 32-bit IEEE float, the float32 samples exactly, ``58 + 4·n`` bytes;
    ``"PCM_16"``: ``clip(round(y × 32767), −32768, 32767)``, ``44 + 2·n`` bytes.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.io.audio.valid_audio`, ``sr`` is not positive, or ``subtype``
        is unknown.
    """
    y = valid_audio(np.asarray(y), name="wav_bytes input")
    sr = int(sr)
    if sr <= 0:
        raise AiplibParameterError(f"sample rate must be positive, got {sr}")
    if subtype == "FLOAT":
        data = y.astype("<f4", copy=False)
    elif subtype == "PCM_16":
        data = np.clip(np.round(y.astype(np.float64) * 32767.0), -32768, 32767).astype("<i2")
    else:
        raise AiplibParameterError(f"unknown WAV subtype {subtype!r}; choose FLOAT or PCM_16")
    buf = io.BytesIO()
    wavfile.write(buf, sr, data)
    return buf.getvalue()


def under_papermill() -> bool:
    """True when this kernel was started by papermill: ``JPY_PARENT_PID`` (set by jupyter_client)
    names a process whose command line holds ``papermill`` (notebook 10 then prints static tables,
    not the widget)."""
    try:
        return (
            b"papermill"
            in Path(f"/proc/{int(os.environ.get('JPY_PARENT_PID', ''))}/cmdline").read_bytes()
        )
    except (ValueError, OSError):
        return False
