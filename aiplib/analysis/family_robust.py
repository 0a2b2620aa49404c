"""The robust view of the condition-family tables (:mod:`aiplib.analysis.family_results`), reported beside
the paper's mean ΔWER / ΔAcc, never instead of it.

The mean per-utterance ΔWER is unbounded above: one looping hypothesis ("a a a a …", WER 5.0)
adds 500 pp to its item, so a few loops can carry a cell to +100 pp. Beside it, as in the
background battery's tables (:func:`aiplib.analysis.conditions.condition_table`, ``mean_wer_capped_pp``,
``median_wer_pp``, ``n_loops``, ``strict_acc_pp``, ``non_answer_pp``), each family cell gets:

- ASR ``delta_wer_capped_pp``: mean over the paired items of min(WER_noisy, 1) − min(WER_clean, 1)
  (the ``delta_capped_pp`` of :func:`~aiplib.analysis.conditions.condition_table`), in pp;
- ASR ``median_delta_wer_pp``: median over the paired noisy stimuli of WER_noisy − WER_clean (the
  score files' ``delta_wer``), in pp;
- ASR ``n_loops``: noisy stimuli whose hypothesis is a repetition loop (``is_loop``,
  :func:`aiplib.core.textnorm.loop_kind`);
- KWS ``delta_strict_acc_pp`` with its interval: the paired change of the strict accuracy (an
  answer counts only when correct and not a non-answer, ``correct_strict`` of
  :func:`aiplib.core.textnorm.score_kws_row`), clean − noisy so + = worse as ΔAcc, computed by
  :func:`~aiplib.analysis.conditions.condition_table` on ``correct_strict`` (same pairing and bootstrap);
- KWS ``n_non_answers``: noisy responses that are empty, a refusal or several words
  (``non_answer``).

A column is NaN when the score table lacks the flag it needs (scores written before the flag).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.io.formats import parse_bool

__all__ = ["ASR_ROBUST_COLUMNS", "KWS_ROBUST_COLUMNS", "asr_robust", "kws_robust"]

ASR_ROBUST_COLUMNS = ["delta_wer_capped_pp", "median_delta_wer_pp", "n_loops"]
"""ASR robust columns of the family tables (pp, pp, count)."""

KWS_ROBUST_COLUMNS = ["delta_strict_acc_pp", "delta_strict_acc_ci_low_pp", "delta_strict_acc_ci_high_pp",
                      "n_non_answers"]
"""KWS robust columns of the family tables (pp ×3, count)."""


def _flags(col: pd.Series) -> np.ndarray:
    """A 0/1 / True/False score column as floats, NaN where unknown (:func:`aiplib.io.formats.parse_bool`)."""
    return np.array([np.nan if f is pd.NA else float(f) for f in map(parse_bool, col)])


def _by(scope: str) -> list[str]:
    return ["model", *cond.SCOPES[scope]]


def _noisy(scores: pd.DataFrame) -> pd.DataFrame:
    n = scores[scores["bg_id"].astype(str) != "clean"]
    return n.assign(bg_id=n["bg_id"].astype(str), snr_db=pd.to_numeric(n["snr_db"], errors="coerce"))


def _aligned(values: pd.Series | None, paired: pd.DataFrame, by: list[str]) -> np.ndarray:
    """``values`` (indexed on ``by``) in the row order of ``paired`` (``bg_id`` as ``condition_id``)."""
    if values is None:
        return np.full(len(paired), math.nan)
    keys = pd.MultiIndex.from_frame(paired[[c if c != "bg_id" else "condition_id" for c in by]])
    return values.reindex(keys).to_numpy(dtype=float)


def asr_robust(paired: pd.DataFrame, scores: pd.DataFrame, scope: str) -> pd.DataFrame:
    """The ASR robust columns of the rows of ``paired``.

    Parameters
    ----------
    paired : pandas.DataFrame [shape=(n_rows, ...)]
        :func:`aiplib.analysis.conditions.condition_table` of ``scores`` in ``scope``, ``bg_id`` renamed
        ``condition_id`` (its ``delta_capped_pp`` and ``n_loops`` are taken as they are).
    scores : pandas.DataFrame
        The family's ASR score rows (``model, bg_id, snr_db`` and ``delta_wer``, the per-row paired
        WER change as a fraction; without it ``median_delta_wer_pp`` is NaN).
    scope : {"condition", "background"}
        The grouping of ``paired`` (:data:`aiplib.analysis.conditions.SCOPES`).

    Returns
    -------
    pandas.DataFrame [shape=(n_rows, 3)]
        :data:`ASR_ROBUST_COLUMNS`, index of ``paired``.
    """
    by = _by(scope)
    med = None
    if "delta_wer" in scores.columns:
        n = _noisy(scores)
        med = 100 * pd.to_numeric(n["delta_wer"], errors="coerce").groupby([n[c] for c in by]).median()
    return pd.DataFrame({"delta_wer_capped_pp": paired["delta_capped_pp"].to_numpy(dtype=float),
                         "median_delta_wer_pp": _aligned(med, paired, by),
                         "n_loops": paired["n_loops"].to_numpy(dtype=float)}, index=paired.index)


def kws_robust(scores: pd.DataFrame, scope: str, *, n_resamples: int = 2000, seed: int = 0,
               level: float = 0.95) -> pd.DataFrame:
    """The KWS robust columns per (model, condition) of ``scope``.

    Parameters
    ----------
    scores : pandas.DataFrame
        The family's KWS score rows (the columns of :func:`aiplib.analysis.conditions.condition_table`,
        ``correct_strict`` and ``non_answer``; either may be absent, its columns are then NaN).
    scope : {"condition", "background"}
    n_resamples, seed, level
        Bootstrap of the strict change (:func:`aiplib.analysis.conditions.condition_table`).

    Returns
    -------
    pandas.DataFrame
        ``model, condition_id`` (and ``snr_db`` in scope ``condition``) then
        :data:`KWS_ROBUST_COLUMNS`: ``delta_strict_acc_pp`` = mean over paired items of
        strict(clean) − strict(noisy) in pp (+ = worse) with its percentile-bootstrap interval, and
        ``n_non_answers`` among the noisy responses.
    """
    by = _by(scope)
    key = [c if c != "bg_id" else "condition_id" for c in by]
    n = _noisy(scores)
    out = n[by].drop_duplicates().rename(columns={"bg_id": "condition_id"}).reset_index(drop=True)
    if "correct_strict" in scores.columns:
        f = _flags(scores["correct_strict"])
        known = scores[np.isfinite(f)].assign(correct=f[np.isfinite(f)])
        s = cond.condition_table(known, "kws", scopes=(scope,), n_resamples=n_resamples, seed=seed, level=level)
        s = s.rename(columns={"bg_id": "condition_id", "delta_pp": "delta_strict_acc_pp",
                              "ci_low_pp": "delta_strict_acc_ci_low_pp", "ci_high_pp": "delta_strict_acc_ci_high_pp"})
        out = out.merge(s[key + KWS_ROBUST_COLUMNS[:3]], on=key, how="left")
    else:
        out = out.assign(**dict.fromkeys(KWS_ROBUST_COLUMNS[:3], math.nan))
    if "non_answer" in n.columns:
        fl = pd.Series(_flags(n["non_answer"]), index=n.index)
        cnt = fl.groupby([n[c] for c in by]).sum(min_count=1)
        out["n_non_answers"] = _aligned(cnt, out, by)
    else:
        out["n_non_answers"] = math.nan
    return out[key + KWS_ROBUST_COLUMNS]
