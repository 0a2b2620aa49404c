"""Stage 8 of the ``competing_speech`` condition family: the leakage of the distractor's words into
the answer (MUSA's "interference" errors).

ASR *leak words* are hypothesis words (paper normalisation) in the distractor's transcript and not
in the target's, ``leak_share = n_leak_words / n_hyp_words``; KWS: the answer's first word is a
distractor word other than the label. Chance overlap is measured by the *floor* (the item's clean
hypothesis against this row's distractor text) and the *mismatch* share (this row's hypothesis
against the distractor text of the next item in the same condition and SNR).

The two task families differ in the rule only: :data:`LEAK_RULES` holds one per scorer name
(:attr:`aiplib.core.tasks.TaskFamily.scoring`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aiplib.core.tasks import CONDITION_FAMILIES, TaskFamily
from aiplib.core.textnorm import kws_first_word, normalize_kws_label, normalize_text

#: The family these columns belong to (``tasks.yaml``).
FAMILY = CONDITION_FAMILIES["competing_speech"]

#: ASR leakage score columns (NaN on clean rows; ``floor_*`` NaN without a clean row of the item).
LEAK_ASR_COLUMNS = [
    "n_hyp_words",
    "n_leak_words",
    "leak_share",
    "n_leak_insertions",
    "leak_words",
    "floor_n_hyp_words",
    "floor_n_leak_words",
    "floor_leak_share",
    "mismatch_n_leak_words",
    "mismatch_leak_share",
]

#: KWS leakage score columns (empty on clean rows).
LEAK_KWS_COLUMNS = ["kws_leak", "kws_leak_floor", "kws_leak_mismatch"]

#: Types of the family's score columns when read back
#: (:func:`aiplib.scoring.families.read_family_scores`): ``float`` or ``bool``.
SCORE_TYPES = {
    **{c: "float" for c in LEAK_ASR_COLUMNS if c != "leak_words"},
    **{c: "bool" for c in (*LEAK_KWS_COLUMNS, "same_voice_as_target")},
}

#: The rule in words, written to the score sidecar (``leakage_rule``).
LEAKAGE_RULE = (
    "leak words: hypothesis words (paper normalisation) in the distractor transcript and not in "
    "the target's; leak_share = n_leak_words / n_hyp_words; KWS: first word of the answer is a "
    "distractor word other than the label; floor_*: the item's clean hypothesis against this "
    "row's distractor text; mismatch_*: this row's hypothesis against the distractor text of the "
    "next item in the same condition and SNR (same languages, not heard)"
)

#: The per-row counts of :func:`leakage_asr` that the floor repeats on the clean hypothesis.
FLOOR_COUNTS = ("n_hyp_words", "n_leak_words", "leak_share")

#: The per-row counts of :func:`leakage_asr` that the mismatch baseline repeats.
MISMATCH_COUNTS = ("n_leak_words", "leak_share")


# ------------------------------------------------------------------------------ one answer
def _joined(text):
    """A text, or a sequence of texts joined by spaces."""
    if isinstance(text, (list, tuple)):
        return " ".join(str(t) for t in text)
    return text


def _words(text) -> list[str]:
    """The words of a text (or texts) after the paper's normalisation."""
    return normalize_text(_joined(text)).split()


def _inserted(ref: list[str], hyp: list[str]) -> list[bool]:
    """Per hypothesis word, whether the alignment target → hypothesis (jiwer) inserts it; every
    word when the target is empty."""
    import jiwer

    inserted = [not ref] * len(hyp)
    if not (hyp and ref):
        return inserted
    for chunk in jiwer.process_words(" ".join(ref), " ".join(hyp)).alignments[0]:
        if chunk.type == "insert":
            for i in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
                inserted[i] = True
    return inserted


def leakage_asr(hypothesis, target_text, distractor_text) -> dict:
    """Distractor words in an ASR hypothesis (paper normalisation, jiwer alignment).

    Parameters
    ----------
    hypothesis : str or None
    target_text : str
    distractor_text : str or sequence of str
        The transcripts of the distractor utterances heard.

    Returns
    -------
    dict
        ``n_hyp_words``, ``n_leak_words`` (in the distractor's vocabulary, not the target's),
        ``leak_share`` (NaN for an empty hypothesis), ``n_insertions`` (target → hypothesis),
        ``n_leak_insertions``, ``leak_words`` (space-separated, in hypothesis order).
    """
    hyp = _words(hypothesis)
    ref = _words(target_text)
    leak_vocab = set(_words(distractor_text)) - set(ref)
    is_leak = [w in leak_vocab for w in hyp]
    inserted = _inserted(ref, hyp)
    n_leak = sum(is_leak)
    if hyp:
        share = n_leak / len(hyp)
    else:
        share = float("nan")
    return dict(
        n_hyp_words=len(hyp),
        n_leak_words=n_leak,
        leak_share=share,
        n_insertions=sum(inserted),
        n_leak_insertions=sum(a and b for a, b in zip(is_leak, inserted)),
        leak_words=" ".join(w for w, x in zip(hyp, is_leak) if x),
    )


def _answered(response) -> bool:
    """Whether a KWS response holds an answer (an empty one reads "silence": it never leaks)."""
    if response is None:
        return False
    if isinstance(response, float) and math.isnan(response):
        return False
    return bool(str(response).strip())


def leakage_kws(response, distractor_text, *, label) -> dict:
    """Whether a KWS response is a distractor word (the paper's first-word rule).

    Returns
    -------
    dict
        ``first_word`` (:func:`aiplib.core.textnorm.kws_first_word`) and ``kws_leak``: the first
        word is a word of ``distractor_text`` (str or sequence of str, read by the same rule) other
        than ``label``; an empty answer never leaks.
    """
    first = kws_first_word(response)
    # the distractor's words read as the answer is (kws_first_word: lower case, ASCII punctuation
    # stripped at the ends, apostrophes kept), not with the ASR normalisation (which splits
    # "l'appel")
    words = str(_joined(distractor_text) or "").split()
    vocab = {kws_first_word(t) for t in words} - {normalize_kws_label(label), ""}
    leak = bool(_answered(response) and first and first in vocab)
    return dict(first_word=first, kws_leak=leak)


# ------------------------------------------------------------------------------ one score row
def _asr_leak_row(response, reference, dtext, floor_response, other_text) -> dict:
    """The :data:`LEAK_ASR_COLUMNS` of one noisy row: its leakage, the floor (the clean
    hypothesis, when a string) and the mismatch baseline (another item's text, when a string)."""
    row = leakage_asr(response, reference, dtext)
    out = {k: row[k] for k in LEAK_ASR_COLUMNS[:5]}
    floor = {k: math.nan for k in FLOOR_COUNTS}
    if isinstance(floor_response, str):
        floor = leakage_asr(floor_response, reference, dtext)
    mismatch = {k: math.nan for k in MISMATCH_COUNTS}
    if isinstance(other_text, str):
        mismatch = leakage_asr(response, reference, other_text)
    for k in FLOOR_COUNTS:
        out[f"floor_{k}"] = floor[k]
    for k in MISMATCH_COUNTS:
        out[f"mismatch_{k}"] = mismatch[k]
    return out


def _kws_leak_row(response, label, dtext, floor_response, other_text) -> dict:
    """The :data:`LEAK_KWS_COLUMNS` of one noisy row (``pd.NA`` where the floor's clean answer or
    the mismatch's other text is missing)."""
    out = dict(
        kws_leak=leakage_kws(response, dtext, label=label)["kws_leak"],
        kws_leak_floor=pd.NA,
        kws_leak_mismatch=pd.NA,
    )
    if isinstance(floor_response, str):
        out["kws_leak_floor"] = leakage_kws(floor_response, dtext, label=label)["kws_leak"]
    if isinstance(other_text, str):
        out["kws_leak_mismatch"] = leakage_kws(response, other_text, label=label)["kws_leak"]
    return out


def _asr_blank() -> dict:
    """The ASR columns of a row without leakage (a clean row): NaN, ``leak_words`` empty."""
    blank = {c: math.nan for c in LEAK_ASR_COLUMNS}
    blank["leak_words"] = ""
    return blank


def _kws_blank() -> dict:
    """The KWS columns of a row without leakage: ``pd.NA``."""
    return {c: pd.NA for c in LEAK_KWS_COLUMNS}


@dataclass(frozen=True)
class LeakRule:
    """One task family's leakage rule.

    Attributes
    ----------
    target : str
        Score-row column holding the target (``reference``, ``label``).
    columns : list of str
        The columns it adds, in order.
    row : callable
        ``row(response, target, distractor_text, floor_response, other_text) -> dict``.
    blank : callable
        ``blank() -> dict``: the columns on a row that is not a competing-speech noisy row.
    dtype : str or None
        The type the columns are cast to (``"boolean"``), None to keep pandas' own.
    floor : str
        The floor column, NaN where the item has no clean row.
    """

    target: str
    columns: list
    row: Callable
    blank: Callable
    dtype: str | None
    floor: str


#: Scorer name (:attr:`aiplib.core.tasks.TaskFamily.scoring`) → its :class:`LeakRule`.
LEAK_RULES = {
    "wer": LeakRule(
        "reference", LEAK_ASR_COLUMNS, _asr_leak_row, _asr_blank, None, "floor_leak_share"
    ),
    "kws_first_word": LeakRule(
        "label", LEAK_KWS_COLUMNS, _kws_leak_row, _kws_blank, "boolean", "kws_leak_floor"
    ),
}


# ------------------------------------------------------------------------------ the score file
def _mismatched_texts(out: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row, the distractor text of the *next* item (item ids sorted, cyclic) in the same
    condition and SNR (None when the condition holds one item, or on other rows)."""
    res = np.full(len(out), None, dtype=object)
    sub = (
        out[rows]
        .assign(_pos=np.flatnonzero(rows))
        .sort_values(["bg_id", "snr_db", "item_id"], kind="stable")
    )
    for _, g in sub.groupby(["bg_id", "snr_db"], sort=False):
        if len(g) > 1:
            res[g["_pos"].to_numpy()] = np.roll(g["distractor_text"].to_numpy(dtype=object), -1)
    return res


def _noisy_rows(df: pd.DataFrame) -> pd.Series:
    """The competing-speech rows of a score table that are not clean."""
    return (df["condition_family"] == FAMILY.name) & (df["bg_id"] != "clean")


def _clean_responses(out: pd.DataFrame) -> np.ndarray:
    """Per row, the response of its item's clean row (the last one; NaN without one)."""
    clean = out[out["bg_id"] == "clean"].drop_duplicates("item_id", keep="last")
    return clean.set_index("item_id")["response"].reindex(out["item_id"]).to_numpy()


def score_columns(out: pd.DataFrame, task: TaskFamily) -> pd.DataFrame:
    """Stage 8's leakage columns, its floor and its mismatch baseline (:data:`LEAK_ASR_COLUMNS` or
    :data:`LEAK_KWS_COLUMNS`, by ``task.scoring``) appended to the score rows ``out``.

    Parameters
    ----------
    out : pandas.DataFrame [shape=(n_rows, ...)]
        Score rows: ``item_id, bg_id, snr_db, response``, ``reference`` or ``label``, the
        manifest's ``condition_family`` and ``distractor_text``.
    task : aiplib.core.tasks.TaskFamily

    Returns
    -------
    pandas.DataFrame
        ``out`` with the columns after its own; ``out`` unchanged when no noisy row is a
        competing-speech row.
    """
    noisy = _noisy_rows(out).to_numpy()
    if "distractor_text" not in out.columns or not noisy.any():
        return out
    rule = LEAK_RULES[task.scoring]
    parts = zip(
        noisy,
        out["response"],
        out[rule.target],
        out["distractor_text"],
        _clean_responses(out),
        _mismatched_texts(out, noisy),
    )
    rows = []
    for is_noisy, response, target, dtext, floor_response, other_text in parts:
        if is_noisy:
            rows.append(rule.row(response, target, dtext, floor_response, other_text))
        else:
            rows.append(rule.blank())
    leak = pd.DataFrame(rows, index=out.index, columns=rule.columns)
    if rule.dtype is not None:
        leak = leak.astype(rule.dtype)
    return pd.concat([out, leak], axis=1)


def sidecar(df: pd.DataFrame, task: TaskFamily) -> dict:
    """Score sidecar fields: with leakage columns, ``leakage_rule`` (:data:`LEAKAGE_RULE`) and the
    count of noisy rows without a clean partner (``n_leak_rows_without_floor``); else ``{}``."""
    if "leak_share" not in df.columns and "kws_leak" not in df.columns:
        return {}
    floor = LEAK_RULES[task.scoring].floor
    n_without = int(df.loc[_noisy_rows(df), floor].isna().sum())
    return dict(leakage_rule=LEAKAGE_RULE, n_leak_rows_without_floor=n_without)
