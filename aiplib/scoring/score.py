"""Stage 8: word error rate, the keyword-spotting rule and score files.

The headline WER uses the paper's normalisation (:func:`aiplib.core.textnorm.normalize_text`); a
Whisper-style WER (``wer_whisper``) beside it uses OpenAI's ``EnglishTextNormalizer``
(:func:`aiplib.core.textnorm.normalize_whisper`). Alignment and error counts come from jiwer [1]_.
Raw and normalised text are both kept in ``results/scores/<task>.csv``.

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``cer``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import textnorm as tn
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.progress import track
from aiplib.core.tasks import (
    KEYWORDS,
    TASK_FAMILIES,
    normalize_keywords,
    task_family,
)
from aiplib.core.workspace import workspace
from aiplib.inference.shards import is_shard_file, one_answer_per_stimulus
from aiplib.io.formats import (
    NULL_ANSWER_RULES,
    manifest_view,
    read_item_bank_keywords,
    read_manifest_csv,
    read_results,
    write_scores,
)
from aiplib.scoring import error_rates
from aiplib.scoring.family_columns import FAMILY_SCORE_COLUMNS, add_family_scores, family_sidecar

log = logging.getLogger(__name__)

#: Condition-family folders of ``inference/<family>/``: not model folders.
_FAMILY_FOLDERS = (
    "background",
    "competing_speech",
    "channel",
)

#: The null-answer rule of each profile (:data:`aiplib.io.formats.NULL_ANSWER_RULES`): the paper
#: profile scores a JSON null answer as the text "None", as the authors' stage 6 did; a profile not
#: listed counts it as failed.
PROFILE_NULL_ANSWER = {"paper": "text_none", "demo": "failed", "custom": "failed"}


def scoring_rules(profile: str, *, response_cleanup: str = "", null_answer: str = "") -> dict:
    """The answer rules of stage 8: ``{"response_cleanup", "null_answer"}``, each the value given
    or, when empty, the default (``none``; :data:`PROFILE_NULL_ANSWER` of ``profile``).

    Raises
    ------
    AiplibParameterError
        If a value is not one of :data:`aiplib.core.textnorm.RESPONSE_CLEANUPS` /
        :data:`aiplib.io.formats.NULL_ANSWER_RULES`.
    """
    cleanup = response_cleanup or "none"
    null_rule = null_answer or PROFILE_NULL_ANSWER.get(profile, "failed")
    if cleanup not in tn.RESPONSE_CLEANUPS:
        raise AiplibParameterError(
            f"response_cleanup must be one of {list(tn.RESPONSE_CLEANUPS)}, got {cleanup!r}"
        )
    if null_rule not in NULL_ANSWER_RULES:
        raise AiplibParameterError(
            f"null_answer must be one of {list(NULL_ANSWER_RULES)}, got {null_rule!r}"
        )
    return {"response_cleanup": cleanup, "null_answer": null_rule}


def _white_space_only(text) -> str:
    """The text with runs of white space made one space (the ``none`` normaliser)."""
    return " ".join(str(text or "").split())


#: Normaliser name of :func:`wer` → function of one raw text.
_NORMALIZERS = {
    "paper": tn.normalize_text,
    "whisper": tn.normalize_whisper,
    "none": _white_space_only,
}


def answer_rules(rules: dict) -> dict:
    """The answer rules of :func:`scoring_rules` with what each means, for sidecars and provenance:
    ``{"response_cleanup": {"name", "rule"}, "null_answer": {"name", "rule"}}``."""
    null_text = {
        "failed": "a JSON null answer counts as a failed generation (left out)",
        "text_none": 'a JSON null answer is scored as the text "None" (the authors\' str(raw))',
    }
    cleanup = rules["response_cleanup"]
    null_rule = rules["null_answer"]
    return {
        "response_cleanup": {"name": cleanup, "rule": tn.RESPONSE_CLEANUPS[cleanup]},
        "null_answer": {"name": null_rule, "rule": null_text[null_rule]},
    }


def normalizer_provenance() -> dict:
    """``{"normalizer": {"name", "version", "rule"}, "normalizer_whisper": {"name", "version"},
    "jiwer_version"}``, for sidecars and provenance.
    """
    return {
        "normalizer": {
            "name": tn.NORMALIZER_NAME,
            "version": tn.NORMALIZER_VERSION,
            "rule": tn.NORMALIZER_RULE,
        },
        "normalizer_whisper": {
            "name": tn.WHISPER_NORMALIZER_NAME,
            "version": tn.WHISPER_NORMALIZER_VERSION,
        },
        "jiwer_version": tn.JIWER_VERSION,
    }


def wer(ref: str, hyp: str, *, normalizer: str = "paper") -> float:
    """Word error rate of one utterance, on normalised text: ``(S + D + I) / N``, ``N`` the
    reference words.

    ``ref, hyp``: raw reference and recogniser output (an empty ``hyp`` gives 1.0); ``normalizer``:
    ``"paper"`` (:func:`normalize_text`), ``"whisper"`` (:func:`normalize_whisper`) or ``"none"``
    (white space only). The WER can exceed 1 (insertions); NaN when the normalised reference is
    empty.

    Examples
    --------
    >>> wer("the cat sat", "the cat sat down")
    0.3333333333333333
    """
    return wer_details([ref], [hyp], normalizer=normalizer)["per_utterance"][0]


def wer_details(refs, hyps, *, normalizer: str = "paper") -> dict:
    """Corpus-level WER, mean per-utterance WER, S/D/I/hit counts and CER.

    ``refs, hyps``: sequences of str, shape (n_utterances,); ``normalizer`` as :func:`wer`. Returns
    ``wer`` = Σ(S+D+I) / Σ N (pooled; NaN if Σ N = 0), ``mean_wer`` (of the defined per-utterance
    WERs), ``substitutions, deletions, insertions, hits, errors, ref_words`` (int; ``ref_words`` = H
    + S + D), ``cer`` (``jiwer.cer`` over utterances with a reference), ``per_utterance`` (NaN for
    an empty reference), ``n_utterances``, ``n_ref_empty`` (their insertions count in ``wer``).

    Raises
    ------
    ValueError
        If the sequences differ in length (both quoted), are empty, or ``normalizer`` is unknown.
    """
    refs = list(refs)
    hyps = list(hyps)
    if len(refs) != len(hyps):
        raise ValueError(f"got {len(refs)} references but {len(hyps)} hypotheses")
    if not refs:
        raise ValueError("no utterances to score")
    if normalizer not in _NORMALIZERS:
        raise ValueError(f"unknown normalizer {normalizer!r}; choose from {list(_NORMALIZERS)}")
    norm = _NORMALIZERS[normalizer]
    ref_norm = [norm(r) for r in refs]
    hyp_norm = [norm(h) for h in hyps]
    counts = [tn.align(rn, hn) for rn, hn in zip(ref_norm, hyp_norm)]  # (S, D, I, H) per utterance
    per = [_utterance_wer(*c) for c in counts]
    s, d, ins, h = (sum(c) for c in zip(*counts))
    n_ref = h + s + d
    defined = [v for v in per if not math.isnan(v)]
    return {
        "wer": error_rates.pooled_wer(s + d + ins, n_ref),
        "mean_wer": float(np.mean(defined)) if defined else float("nan"),
        "substitutions": int(s),
        "deletions": int(d),
        "insertions": int(ins),
        "hits": int(h),
        "errors": int(s + d + ins),
        "ref_words": int(n_ref),
        "cer": error_rates.corpus_cer(ref_norm, hyp_norm),
        "per_utterance": per,
        "n_utterances": len(refs),
        "n_ref_empty": sum(1 for r in ref_norm if not r),
    }


def _utterance_wer(subs: int, dels: int, ins: int, hits: int) -> float:
    """``(S + D + I) / (H + S + D)`` of one utterance (NaN for an empty reference)."""
    n_ref = hits + subs + dels
    if not n_ref:
        return float("nan")
    return (subs + dels + ins) / n_ref


def _read_manifest(ws, family: str, manifests_dir=None) -> pd.DataFrame | None:
    """The scoring view of ``<manifests_dir or ws.manifests>/<family>.csv``, None when absent."""
    p = (
        Path(manifests_dir) / f"{family}.csv"
        if manifests_dir is not None
        else ws.manifest_csv(family)
    )
    if not p.exists():
        return None
    try:
        m = read_manifest_csv(p)
    except AiplibParameterError as exc:
        raise AiplibError(str(exc)) from None
    return _with_family_columns(manifest_view(m, family), m)


def _with_family_columns(view: pd.DataFrame, m: pd.DataFrame) -> pd.DataFrame:
    """``view`` plus the condition-family columns of ``m`` (:data:`FAMILY_SCORE_COLUMNS`) when a
    row's ``condition_family`` is not ``background`` (background score files stay unchanged).
    """
    fams = sorted(
        {str(v) for v in m.get("condition_family", [])} - {"", "background", "clean", "nan"}
    )
    if not fams:
        return view
    extra = m.assign(id=m["id"].astype(str)).drop_duplicates("id", keep="last").set_index("id")
    view = view.copy()
    for c in [c for c in FAMILY_SCORE_COLUMNS if c in extra.columns]:
        view[c] = extra[c].reindex(view.index.astype(str)).to_numpy()
    if len(fams) == 1:  # the items' clean rows belong to the family of their manifest
        view["condition_family"] = fams[0]
    return view


def _as_bool(v, label, keywords=KEYWORDS) -> bool:
    t = str(v).strip().lower()
    if t in ("true", "1", "yes", "t"):
        return True
    if t in ("false", "0", "no", "f"):
        return False
    return tn.normalize_kws_label(label) in keywords


#: The columns the ``wer`` scorer adds to a score row, in order.
_ASR_ROW_COLUMNS = list(tn.score_asr_row("a", "a"))

#: The columns the ``kws_first_word`` scorer adds to a score row, in order.
_KWS_ROW_COLUMNS = list(tn.score_kws_row("yes", "yes", True))


def score_asr_rows(man: pd.DataFrame, responses, keywords) -> tuple[dict, pd.DataFrame]:
    """The ``wer`` scorer: the reference column and the per-row WER columns
    (:func:`aiplib.core.textnorm.score_asr_row`) of ``responses`` (shape (n_rows,), the answers as
    scored) against ``man["reference"]``; ``keywords`` is not used."""
    references = man["reference"].to_numpy()
    per_row = [tn.score_asr_row(ref, hyp) for ref, hyp in zip(references, responses)]
    frame = pd.DataFrame(per_row, columns=_ASR_ROW_COLUMNS)
    if tn.headline_measure(references) == "cer":
        frame = _with_cer(frame)
    return {"reference": references}, frame


def _with_cer(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (per-row ASR scores) with ``char_errors``, ``ref_chars`` (jiwer characters of the
    normalised texts, spaces counted) and ``cer`` (NaN for an empty reference) after ``wer``: the
    headline of references written without word spaces (:func:`aiplib.core.textnorm.
    headline_measure`)."""
    errors, n_chars = error_rates.char_counts(frame["ref_norm"], frame["hyp_norm"])
    cer = np.full(len(frame), np.nan)
    np.divide(errors, n_chars, out=cer, where=n_chars > 0)
    at = frame.columns.get_loc("wer") + 1
    frame.insert(at, "cer", cer)
    frame.insert(at, "ref_chars", n_chars)
    frame.insert(at, "char_errors", errors)
    return frame


def score_kws_rows(man: pd.DataFrame, responses, keywords) -> tuple[dict, pd.DataFrame]:
    """The ``kws_first_word`` scorer: the ``label, is_target`` columns and the per-row KWS columns
    (:func:`aiplib.core.textnorm.score_kws_row`) of ``responses`` (shape (n_rows,)) under the
    closed keyword set ``keywords``."""
    labels = man["reference"].to_numpy()
    is_target = [
        _as_bool(target, label, keywords)
        for target, label in zip(man["is_target"], man["reference"])
    ]
    per_row = [
        tn.score_kws_row(response, label, target, keywords)
        for response, label, target in zip(responses, labels, is_target)
    ]
    references = {"label": labels, "is_target": is_target}
    return references, pd.DataFrame(per_row, columns=_KWS_ROW_COLUMNS)


def _count_asr_rows(out: pd.DataFrame, meta: dict, model: str, where: str) -> None:
    """Record empty references and loops of one model's ASR rows in ``meta`` (warns on empty
    references)."""
    empty = out["ref_empty"].astype(bool)
    meta["n_empty_reference"][model] = int(empty.sum())
    meta.setdefault("n_loops", {})[model] = int(out["is_loop"].sum())
    if "cer" in out.columns and "headline_measure" not in meta:
        meta["headline_measure"] = "cer"
        warnings.warn(
            f"{where}: the references are written without spaces between words "
            f"({tn.spaceless_share(out['reference']):.0%} of their letters are CJK, Thai or a "
            "script like them): WER counts a sentence as one word, so CER is the headline "
            "(columns cer, delta_cer; the condition tables' cer_pp)",
            stacklevel=5,
        )
    if empty.any():
        warnings.warn(
            f"{where}: {int(empty.sum())} references are empty after "
            "normalisation; their per-utterance WER is NaN (ref_empty) and "
            "their insertions count in corpus WER",
            stacklevel=5,
        )


def _count_kws_rows(out: pd.DataFrame, meta: dict, model: str, where: str) -> None:
    """Record the non-answers of one model's KWS rows in ``meta``."""
    meta["n_empty_reference"][model] = 0
    meta.setdefault("n_non_answers", {})[model] = int(out["non_answer"].sum())


def _no_rule_fields(keywords) -> dict:
    """No sidecar fields beyond the normalisers (WER)."""
    return {}


def _kws_rule_fields(keywords) -> dict:
    """The KWS rule and its keyword set, for the sidecar."""
    return {"kws_rule": tn.KWS_RULE, "keywords": list(keywords)}


@dataclass(frozen=True)
class Scorer:
    """How one task family's rows are scored (registered in :data:`SCORERS` under the family's
    ``scoring`` name).

    Attributes
    ----------
    rows : callable
        ``(manifest view, responses, keywords) -> (reference columns, per-row score frame)``.
    counts : callable
        ``(scored rows, meta, model, where) -> None``: adds the family's counts to the sidecar.
    sidecar : callable
        ``(keywords) -> dict``: the family's rule fields of the sidecar.
    reference_column : str
        The score-file column holding each row's reference (``reference``, ``label``).
    """

    rows: Callable
    counts: Callable
    sidecar: Callable
    reference_column: str


#: Scoring rule name (``TaskFamily.scoring`` in ``tasks.yaml``) → :class:`Scorer`.
SCORERS: dict[str, Scorer] = {
    "wer": Scorer(
        rows=score_asr_rows,
        counts=_count_asr_rows,
        sidecar=_no_rule_fields,
        reference_column="reference",
    ),
    "kws_first_word": Scorer(
        rows=score_kws_rows,
        counts=_count_kws_rows,
        sidecar=_kws_rule_fields,
        reference_column="label",
    ),
}


def _new_meta(manifest: pd.DataFrame | None) -> dict:
    """The empty sidecar counts of one task, in sidecar order."""
    return {
        "n_errors": {},
        "n_rows_per_model": {},
        "n_malformed_lines": {},
        "n_duplicates": {},
        "n_not_in_manifest": {},
        "n_empty_reference": {},
        "prompt_ids": {},
        "sources": [],
        "manifest_source": "manifests" if manifest is not None else "inference rows",
        "n_null_as_text": {},
        "n_cleaned": {},
    }


def _read_model_rows(ws, path: Path, rules: dict, meta: dict, model: str) -> pd.DataFrame:
    """One model's inference rows (one answer per stimulus; identical repeats read once, with a
    note), counted in ``meta``; :func:`aiplib.inference.shards.one_answer_per_stimulus` refuses two
    different answers for one stimulus and another model's rows."""
    n_identical = one_answer_per_stimulus(path, model)
    if n_identical:
        log.warning(
            "%s: %d row(s) repeat another row's stimulus, prompt, key and answer; "
            "each is read once",
            path,
            n_identical,
        )
    ok = read_results(path, keep_errors=False, null_answer=rules["null_answer"])
    meta["sources"].append(ws.rel(path) if hasattr(ws, "rel") else str(path))
    meta["n_malformed_lines"][model] = ok.attrs["n_skipped"]
    meta["n_errors"][model] = ok.attrs["n_failed"]
    meta["n_null_as_text"][model] = ok.attrs["n_null_as_text"]
    meta["n_duplicates"][model] = ok.attrs["n_rows"] - len(ok) - ok.attrs["n_failed"]
    ok["stimulus_id"] = ok["id"]
    # the authors' row format: id, raw (the response), error on failures
    ok["response"] = ok["raw"]
    return ok


def _unknown_rows(ok: pd.DataFrame, manifest: pd.DataFrame | None) -> pd.Series:
    """True for rows whose stimulus is not in the manifest (without a manifest: rows that carry no
    manifest columns)."""
    if manifest is not None:
        return ~ok["stimulus_id"].isin(manifest.index)
    if "speech_id" in ok.columns:
        return ok["speech_id"].isna()
    return pd.Series(True, index=ok.index)


def _drop_unknown(ok, manifest, meta: dict, model: str, path: Path, fam: str) -> pd.DataFrame:
    """The rows whose stimulus the manifest knows (the others counted and warned about)."""
    unknown = _unknown_rows(ok, manifest)
    meta["n_not_in_manifest"][model] = int(unknown.sum())
    if unknown.any():
        warnings.warn(
            f"{path}: {int(unknown.sum())} stimulus ids are not in "
            f"manifests/{fam}.csv (or carry no manifest columns); dropped",
            stacklevel=5,
        )
    return ok[~unknown]


def _prompt_text(value) -> str:
    """A row's ``prompt_id`` as text ("" when missing)."""
    if value is None or value != value:
        return ""
    return str(value)


def _prompt_set_name(value) -> str:
    """A row's ``prompt_set`` ("unrecorded" when the row names none, e.g. the authors' rows)."""
    if value is None or value != value or value == "":
        return "unrecorded"
    return str(value)


def _count_prompts(ok: pd.DataFrame, meta: dict, model: str, path: Path) -> None:
    """Normalise ``prompt_id`` / ``prompt_set`` of ``ok`` in place and count them in ``meta`` (warns
    when the rows mix prompts)."""
    ok["prompt_id"] = ok["prompt_id"].map(_prompt_text)
    pids = ok["prompt_id"].value_counts().sort_index()
    meta["prompt_ids"][model] = {k: int(v) for k, v in pids.items()}
    ok["prompt_set"] = ok["prompt_set"].map(_prompt_set_name)
    meta.setdefault("prompt_sets", {})[model] = {
        k: int(v) for k, v in ok["prompt_set"].value_counts().sort_index().items()
    }
    if len(pids) > 1:
        warnings.warn(
            f"{path}: rows come from {len(pids)} prompts {list(pids.index)}; the scores mix them",
            stacklevel=5,
        )


def _row_frame(model: str, task: str, ok: pd.DataFrame, man: pd.DataFrame) -> pd.DataFrame:
    """The leading columns of one model's score rows (ids, condition, accent, prompt)."""
    return pd.DataFrame(
        {
            "model": model,
            "task": task,
            "stimulus_id": ok["stimulus_id"].to_numpy(),
            "item_id": man["item_id"].to_numpy(),
            "bg_id": man["bg_id"].to_numpy(),
            "snr_db": man["snr_db"].to_numpy(),
            "accent_group": man["accent_group"].replace("", np.nan).to_numpy(),
            "accent": man["accent"].replace("", np.nan).to_numpy(),
            "prompt_id": ok["prompt_id"].to_numpy(),
            "prompt_set": ok["prompt_set"].to_numpy(),
            "condition": man["condition"].to_numpy(),
            "bg_active": man["bg_active"].to_numpy(),
        }
    )


def _cleaned_responses(generated: pd.Series, rules: dict, meta: dict, model: str) -> np.ndarray:
    """The answers as scored: cleaned under the rule here only (the inference rows stay as
    written); the number changed is counted in ``meta``."""
    cleaned = pd.Series(
        [tn.clean_response(text, rules["response_cleanup"]) for text in generated],
        index=generated.index,
    )
    meta["n_cleaned"][model] = int((cleaned != generated).sum())
    return cleaned.to_numpy()


def _manifest_source(ok: pd.DataFrame, manifest, fam: str) -> pd.DataFrame:
    """The manifest, or without a manifests folder the rows' own manifest columns."""
    if manifest is not None:
        return manifest
    view = manifest_view(ok.drop(columns=["stimulus_id"]), fam)
    return _with_family_columns(view, ok)


def _score_model(ws, task: str, model: str, path: Path, manifest, context: dict) -> pd.DataFrame:
    """The score rows of one model's inference file of ``task``."""
    fam = task_family(task)
    spec = TASK_FAMILIES[fam]
    scorer = SCORERS[spec.scoring]
    meta = context["meta"]
    rules = context["rules"]
    ok = _read_model_rows(ws, path, rules, meta, model)
    ok = _drop_unknown(ok, manifest, meta, model, path, fam)
    man_src = _manifest_source(ok, manifest, fam)
    _count_prompts(ok, meta, model, path)
    man = man_src.loc[ok["stimulus_id"]]
    out = _row_frame(model, task, ok, man)
    generated = ok["response"].astype(str)
    resp = _cleaned_responses(generated, rules, meta, model)
    references, per_row = scorer.rows(man, resp, context["keywords"])
    for name, values in references.items():
        out[name] = values
    out["response"] = generated.to_numpy()
    if rules["response_cleanup"] != "none":
        out["response_scored"] = resp
    per_row.index = out.index
    out = pd.concat([out, per_row], axis=1)
    scorer.counts(out, meta, model, f"{task}/{model}")
    out = _add_delta(
        out, spec.measure, spec.degradation_column, noisy_minus_clean=spec.higher_is_worse
    )
    if "cer" in out.columns:  # references without word spaces: CER is the headline
        out = _add_delta(out, "cer", "delta_cer", noisy_minus_clean=True)
    meta["n_rows_per_model"][model] = int(len(out))
    tail = ["condition", "bg_active"]
    out = out[[c for c in out.columns if c not in tail] + tail]
    if "condition_family" in man.columns:  # a condition family other than the background battery
        out = add_family_scores(out, man, fam)
    return out


def _score_task(
    ws,
    task: str,
    models,
    manifest: pd.DataFrame | None,
    *,
    inference_dir=None,
    keywords=KEYWORDS,
    rules=None,
) -> tuple[pd.DataFrame, dict]:
    """The score rows of ``task`` over ``models`` and the sidecar counts (``(empty frame, meta)``
    when no model has an inference file)."""
    spec = TASK_FAMILIES[task_family(task)]
    meta = _new_meta(manifest)
    rules = rules or {"response_cleanup": "none", "null_answer": "failed"}
    context = {"meta": meta, "rules": rules, "keywords": keywords}
    inf = Path(inference_dir if inference_dir is not None else ws.inference)
    frames = []
    for model in models:
        if inference_dir is not None:
            path = inf / model / f"{task}.jsonl"
        else:
            path = ws.inference_jsonl(model, task)
        if path.exists():
            frames.append(_score_model(ws, task, model, path, manifest, context))
    if not frames:
        return pd.DataFrame(), meta
    res = pd.concat(frames, ignore_index=True)
    noisy = res["bg_id"] != "clean"
    n_paired = res.loc[noisy, spec.degradation_column].notna().sum()
    meta["n_unpaired"] = int(noisy.sum() - n_paired)
    return res, meta


def _add_delta(
    df: pd.DataFrame, col: str, out_col: str, *, noisy_minus_clean: bool
) -> pd.DataFrame:
    clean = (
        df[df["bg_id"] == "clean"]
        .drop_duplicates(["model", "task", "item_id"], keep="last")
        .set_index(["model", "task", "item_id"])[col]
    )
    c = clean.reindex(pd.MultiIndex.from_frame(df[["model", "task", "item_id"]])).to_numpy(
        dtype=float
    )
    v = df[col].to_numpy(dtype=float)
    d = v - c if noisy_minus_clean else c - v
    d[(df["bg_id"] == "clean").to_numpy()] = np.nan
    df[out_col] = d
    return df


def score_inference(
    ws,
    *,
    models=None,
    tasks=None,
    inference_dir=None,
    manifests_dir=None,
    keywords=None,
    response_cleanup: str = "",
    null_answer: str = "",
) -> dict[str, pd.DataFrame]:
    """Score every inference file and write ``results/scores/<task>.csv`` + ``.json``.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Reads ``inference/<model>/<task>.jsonl`` and ``manifests/<family>.csv`` of its condition
        family's view.
    models, tasks : sequence of str, optional
        Default: every model folder under ``inference/``, every ``<task>.jsonl`` (non-ASR/KWS
        skipped, warned).
    inference_dir, manifests_dir : str or Path, optional
        Read ``<model>/<task>.jsonl`` (e.g. the authors' ``inference/``) / ``<family>.csv`` here
        instead; with no manifest at all the inference rows supply the columns.
    keywords : str or sequence of str, optional
        Closed keyword set of the KWS rule; default the one stored with the KWS item bank.
    response_cleanup, null_answer : str, optional
        The answer rules (:func:`scoring_rules`; empty: ``none`` and the profile's null-answer
        rule): an answer is cleaned (:func:`aiplib.core.textnorm.clean_response`) before it is
        scored, the inference rows and the ``response`` column keep it as generated
        (``response_scored`` beside it when a clean-up is applied); a JSON null answer is failed or
        the text "None".

    Returns
    -------
    dict of str -> pandas.DataFrame
        Per task, one row per (model, stimulus): ``model, task, stimulus_id, item_id, bg_id, snr_db
        (dB; NaN for clean), accent_group, accent, prompt_id, prompt_set ("unrecorded" when a row
        names none), response`` (as generated; ``response_scored`` after a clean-up); ASR adds
        ``reference``, :func:`aiplib.core.textnorm.score_asr_row`'s columns and ``delta_wer =
        WER(noisy) − WER(clean)``; KWS adds ``label, is_target``,
        :func:`aiplib.core.textnorm.score_kws_row`'s columns and ``delta_acc = correct(clean) −
        correct(noisy)`` (NaN on clean rows or without the clean row); last ``condition,
        bg_active``. A condition family's scores add its columns
        (:func:`aiplib.scoring.family_columns.add_family_scores`).

    The sidecar counts ``__ERROR__`` rows (dropped, ``n_errors``), repeated rows (the last
    successful one kept, ``n_duplicates``), unreadable lines (``n_malformed_lines``), empty
    references, loops and KWS non-answers, and records the normalisers, jiwer, the KWS rule and
    keywords, the prompt ids per model and the answer rules (``answer_rules``; ``n_cleaned``,
    ``n_null_as_text`` per model).

    Raises
    ------
    AiplibError
        If no inference file exists at all, or a needed manifest is missing.
    """

    kw = normalize_keywords(keywords) if keywords is not None else read_item_bank_keywords(ws)
    rules = scoring_rules(
        getattr(ws, "profile", ""), response_cleanup=response_cleanup, null_answer=null_answer
    )
    inf = _inference_folder(ws, inference_dir)
    if models is None:
        models = _model_folders(inf)
    if tasks is None:
        tasks = _found_tasks(inf, models)
    if not models or not tasks:
        raise AiplibError(f"no inference files under {inf}; run stage 7 (inference) first")
    manifests = {}
    result = {}
    # tqdm bar, or [progress] lines under make
    for task in track(list(tasks), "scoring", unit="task"):
        fam = task_family(task)
        if not any((inf / m / f"{task}.jsonl").exists() for m in models):
            warnings.warn(
                f"no inference/<model>/{task}.jsonl for models {list(models)}; "
                f"task {task!r} skipped",
                stacklevel=2,
            )
            continue
        if fam not in manifests:
            manifests[fam] = _read_manifest(ws, fam, manifests_dir)
            if manifests[fam] is None:
                log.info("no %s manifest: the inference rows supply the manifest columns", fam)
        df, meta = _score_task(
            ws, task, models, manifests[fam], inference_dir=inf, keywords=kw, rules=rules
        )
        write_scores(ws, task, df, _sidecar(ws, task, df, meta, _SidecarContext(inf, rules, kw)))
        log.info(
            "scored %s: %d rows, %d __ERROR__ rows dropped",
            task,
            len(df),
            sum(meta["n_errors"].values()),
        )
        result[task] = df
    return result


def _inference_folder(ws, inference_dir) -> Path:
    """The folder of ``<model>/<task>.jsonl``: ``inference_dir``, else the workspace's own
    (``inference/`` or a family view's ``inference/<family>/``).

    Raises
    ------
    AiplibError
        If ``inference_dir`` is given and is not a folder.
    """
    if inference_dir is None:
        return Path(ws.inference_jsonl("m", "t")).parents[1]
    inf = Path(inference_dir)
    if not inf.is_dir():
        raise AiplibError(f"{inf}: inference folder not found")
    return inf


def _model_folders(inf: Path) -> list[str]:
    """The model folders under ``inf``, sorted (a condition family's folder is none)."""
    if not inf.exists():
        return []
    return sorted(p.name for p in inf.iterdir() if p.is_dir() and p.name not in _FAMILY_FOLDERS)


def _found_tasks(inf: Path, models) -> list[str]:
    """The task names of the ``<task>.jsonl`` files of ``models`` (sorted; a name in no task
    family is warned about and left out)."""
    found = set()
    for model in models:
        for path in (inf / model).glob("*.jsonl"):
            if path.stem != "run_log" and not is_shard_file(path):
                found.add(path.stem)
    tasks = []
    for task in sorted(found):
        try:
            task_family(task)
        except AiplibParameterError:
            warnings.warn(f"{inf}: task {task!r} is neither ASR nor KWS; not scored", stacklevel=3)
            continue
        tasks.append(task)
    return tasks


@dataclass(frozen=True)
class _SidecarContext:
    """What every task's sidecar of one scoring run shares: the inference folder, the answer rules
    and the keyword set."""

    inference_dir: Path
    rules: dict
    keywords: tuple


def _sidecar(ws, task: str, df: pd.DataFrame, meta: dict, context: _SidecarContext) -> dict:
    """The ``results/scores/<task>.json`` sidecar of one task's score rows."""
    fam = task_family(task)
    side = {
        "task": task,
        "family": fam,
        **normalizer_provenance(),
        "answer_rules": answer_rules(context.rules),
        "n_rows": int(len(df)),
        "inference_dir": ws.rel(context.inference_dir),
        **meta,
    }
    side.update(SCORERS[TASK_FAMILIES[fam].scoring].sidecar(context.keywords))
    if "condition_family" in df.columns:
        side.update(family_sidecar(df, fam))
    return side


def main(argv=None) -> int:
    """``python -m aiplib.scoring.score --profile paper --inference-dir DIR [--manifests-dir DIR]``.

    Scores a folder of inference files written elsewhere (exit 1 with one line when nothing could be
    scored).
    """
    ap = argparse.ArgumentParser(
        prog="python -m aiplib.scoring.score", description=main.__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--profile", default="demo", help="workspace profile whose results/ receive the scores"
    )
    ap.add_argument(
        "--data-root", default=None, help="data root (default $AIP_DATA_ROOT or <repo>/data)"
    )
    ap.add_argument(
        "--inference-dir",
        default=None,
        help="folder of <model>/<task>.jsonl (default: the workspace's)",
    )
    ap.add_argument(
        "--manifests-dir",
        default=None,
        help="folder of asr.csv / kws.csv (default: the workspace's; "
        "without manifests the rows' own columns are used)",
    )
    ap.add_argument("--models", default=None, help="comma-separated model folders (default: all)")
    ap.add_argument("--tasks", default=None, help="comma-separated tasks (default: all found)")
    ap.add_argument(
        "--response-cleanup",
        default="",
        choices=["", *tn.RESPONSE_CLEANUPS],
        help="clean-up of an answer before scoring (default none)",
    )
    ap.add_argument(
        "--null-answer",
        default="",
        choices=["", *NULL_ANSWER_RULES],
        help="a JSON null answer: failed or text_none (default: the profile's rule)",
    )
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ws = workspace(a.profile, data_root=a.data_root)
    ws.ensure()
    try:
        out = score_inference(
            ws,
            models=a.models.split(",") if a.models else None,
            tasks=a.tasks.split(",") if a.tasks else None,
            inference_dir=a.inference_dir,
            manifests_dir=a.manifests_dir,
            response_cleanup=a.response_cleanup,
            null_answer=a.null_answer,
        )
    except AiplibError as exc:
        print(f"scoring: {exc}", file=sys.stderr)
        return 1
    for task, df in out.items():
        side = json.loads(ws.scores_sidecar(task).read_text())
        n_dropped = sum(side["n_errors"].values())
        n_unreadable = sum(side["n_malformed_lines"].values())
        print(
            f"{task}: {len(df)} rows scored, {n_dropped} __ERROR__ stimuli dropped, "
            f"{n_unreadable} unreadable lines -> {ws.scores_csv(task)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
