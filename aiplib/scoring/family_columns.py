"""Stage 8's columns of the condition families: the manifest columns copied, leakage and its floor.

A family other than ``background`` (``competing_speech``, ``channel``) has its own manifests,
inference files and scores (``ws.with_family(cf)``); :func:`aiplib.scoring.score.score_inference` scores
its rows like the background battery's, pairing each with the item's clean row of the same family
(a row is clean by ``condition == "clean"`` or ``background_id == "clean"``, never by its SNR: a
channel row carries the marker ``snr_db = 99``), and calls :func:`add_family_scores` for the
family's own columns.

Leakage (competing speech; :func:`aiplib.stimuli.competing.leakage_asr`, :func:`~aiplib.stimuli.competing.
leakage_kws`, MUSA's "interference" error class): the share of hypothesis words that are in the
distractor's normalised transcript and not in the target's, and for KWS an answer that is a
distractor word. Words shared by chance ("a", "no", "de") count too, so each row also gets the
*floor*: the same measure of the item's clean hypothesis against this row's distractor text.
That floor is near 0 whenever the clean transcript is right (the target's own words never count),
so a second chance baseline is kept beside it, the *mismatch* share: this row's (noisy)
hypothesis against a distractor text it did not hear (the next item's, same condition and SNR) —
the words a confused recogniser produces that any text of those languages would contain.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.stimuli import competing as comp

__all__ = ["FAMILIES", "FAMILY_SCORE_COLUMNS", "LEAK_ASR_COLUMNS", "LEAK_KWS_COLUMNS", "LEAKAGE_RULE",
           "add_family_scores", "family_sidecar"]

FAMILIES = tuple(f for f in CONDITION_FAMILIES if f != "background")
"""The condition families other than ``background``, in report order."""

FAMILY_SCORE_COLUMNS = ["condition_family", "setting", "distractor_languages", "same_voice_as_target",
                        "distractor_ids", "distractor_text", "looped", "channel_condition", "applied_to",
                        "condition_params"]
"""Manifest columns copied into a family's score rows (those present)."""

LEAK_ASR_COLUMNS = ["n_hyp_words", "n_leak_words", "leak_share", "n_leak_insertions", "leak_words",
                    "floor_n_hyp_words", "floor_n_leak_words", "floor_leak_share", "mismatch_n_leak_words",
                    "mismatch_leak_share"]
"""ASR leakage columns of a competing-speech score row (NaN on clean rows; ``floor_*`` NaN without
a clean row of the item)."""

LEAK_KWS_COLUMNS = ["kws_leak", "kws_leak_floor", "kws_leak_mismatch"]
"""KWS leakage columns (empty on clean rows)."""

LEAKAGE_RULE = ("leak words: hypothesis words (paper normalisation) in the distractor transcript and not in "
                "the target's; leak_share = n_leak_words / n_hyp_words; KWS: first word of the answer is a "
                "distractor word other than the label; floor_*: the item's clean hypothesis against this "
                "row's distractor text; mismatch_*: this row's hypothesis against the distractor text of the "
                "next item in the same condition and SNR (same languages, not heard)")


# ------------------------------------------------------------------------------ score rows
def add_family_scores(out: pd.DataFrame, man: pd.DataFrame, task_family: str) -> pd.DataFrame:
    """Append the family columns and, on competing-speech rows, the leakage and its floor.

    Parameters
    ----------
    out : pandas.DataFrame [shape=(n_rows, ...)]
        Score rows of one (model, task) as :func:`aiplib.scoring.score.score_inference` builds them
        (``item_id, bg_id, response`` and ``reference`` (ASR) or ``label`` (KWS)).
    man : pandas.DataFrame [shape=(n_rows, ...)]
        The manifest rows of ``out``, in the same order, with :data:`FAMILY_SCORE_COLUMNS`.
    task_family : {"asr", "kws"}

    Returns
    -------
    pandas.DataFrame
        ``out`` with the family columns present in ``man``, then :data:`LEAK_ASR_COLUMNS` or
        :data:`LEAK_KWS_COLUMNS` when some noisy row is ``competing_speech`` with a
        ``distractor_text``.
    """
    out = out.copy()
    for c in [c for c in FAMILY_SCORE_COLUMNS if c in man.columns]:
        out[c] = man[c].to_numpy()
    comp_rows = ((out["condition_family"] == comp.FAMILY) & (out["bg_id"] != "clean")).to_numpy()
    if "distractor_text" not in out.columns or not comp_rows.any():
        return out
    clean = out[out["bg_id"] == "clean"].drop_duplicates("item_id", keep="last").set_index("item_id")["response"]
    floor_resp = clean.reindex(out["item_id"]).to_numpy()
    other = _mismatched_texts(out, comp_rows)
    if task_family == "asr":
        nan = dict.fromkeys(LEAK_ASR_COLUMNS, math.nan) | {"leak_words": ""}
        rows = []
        for ok, resp, ref, dtext, fresp, otext in zip(comp_rows, out["response"], out["reference"],
                                                      out["distractor_text"], floor_resp, other):
            if not ok:
                rows.append(nan)
                continue
            a = comp.leakage_asr(resp, ref, dtext)
            r = {k: a[k] for k in LEAK_ASR_COLUMNS[:5]}
            if isinstance(fresp, str):
                f = comp.leakage_asr(fresp, ref, dtext)
                r.update(floor_n_hyp_words=f["n_hyp_words"], floor_n_leak_words=f["n_leak_words"],
                         floor_leak_share=f["leak_share"])
            else:
                r.update(floor_n_hyp_words=math.nan, floor_n_leak_words=math.nan, floor_leak_share=math.nan)
            m = comp.leakage_asr(resp, ref, otext) if isinstance(otext, str) else None
            r.update(mismatch_n_leak_words=m["n_leak_words"] if m else math.nan,
                     mismatch_leak_share=m["leak_share"] if m else math.nan)
            rows.append(r)
        leak = pd.DataFrame(rows, index=out.index, columns=LEAK_ASR_COLUMNS)
    else:
        leak = pd.DataFrame({c: pd.array([pd.NA] * len(out), dtype="boolean") for c in LEAK_KWS_COLUMNS},
                            index=out.index)
        for i, (ok, resp, lab, dtext, fresp, otext) in enumerate(zip(comp_rows, out["response"], out["label"],
                                                                     out["distractor_text"], floor_resp, other)):
            if ok:
                leak.iloc[i, 0] = comp.leakage_kws(resp, dtext, label=lab)["kws_leak"]
                if isinstance(fresp, str):
                    leak.iloc[i, 1] = comp.leakage_kws(fresp, dtext, label=lab)["kws_leak"]
                if isinstance(otext, str):
                    leak.iloc[i, 2] = comp.leakage_kws(resp, otext, label=lab)["kws_leak"]
    return pd.concat([out, leak], axis=1)


def _mismatched_texts(out: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row, the distractor text of the *next* item (item ids sorted, cyclic) in the same
    condition and SNR: a text of the same language(s) the row did not hear (None when the
    condition holds one item, or on other rows)."""
    res = np.full(len(out), None, dtype=object)
    sub = (out[rows].assign(_pos=np.flatnonzero(rows))
           .sort_values(["bg_id", "snr_db", "item_id"], kind="stable"))
    for _, g in sub.groupby(["bg_id", "snr_db"], sort=False):
        if len(g) > 1:
            res[g["_pos"].to_numpy()] = np.roll(g["distractor_text"].to_numpy(dtype=object), -1)
    return res


def family_sidecar(df: pd.DataFrame, task_family: str) -> dict:
    """Sidecar fields of a family's score file: ``condition_family`` (sorted list) and, with
    leakage columns, ``leakage_rule`` and the count of leak rows without a clean partner."""
    side = {"condition_family": sorted({str(v) for v in df["condition_family"].dropna()})}
    if "leak_share" in df.columns or "kws_leak" in df.columns:
        floor = "floor_leak_share" if task_family == "asr" else "kws_leak_floor"
        noisy = (df["condition_family"] == comp.FAMILY) & (df["bg_id"] != "clean")
        side.update(leakage_rule=LEAKAGE_RULE, n_leak_rows_without_floor=int(df.loc[noisy, floor].isna().sum()))
    return side


