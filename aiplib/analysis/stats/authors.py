"""The authors' arithmetic where it differs from ours: descriptors rounded before Spearman, the
top-descriptor ranking on rounded mean |r_s|, and the unpaired Residual Effect Ratio (part of
:mod:`aiplib.analysis.stats`).

Source: ``scripts/generate_results_new_2.py`` of the authors' code (IvLabs/AIP-Speech):
``extract_acoustic_descriptors`` (``round`` of each descriptor), ``compute_correlations``
(``Mean |r_s|`` rounded to 3 decimals, then sorted) and ``generate_prompt_rer_plot``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import family_spec

AUTHORS_DESCRIPTOR_DECIMALS = {
    "zcr": 4, "spectral_centroid": 2, "spectral_rolloff": 2, "spectral_bandwidth": 2,
    "spectral_flux": 4, "spectral_flatness": 4, "spectral_contrast": 4, "rms_variance": 6,
}
"""Decimals the authors keep of each descriptor before the correlations (Python ``round``).
``vad_speech_fraction`` (read from their VAD table) and any other column are not rounded."""

TOP_RANK_DECIMALS = 3
"""The authors rank Figure 2's descriptors by mean |r_s| rounded to this many decimals
(``numpy.round``, :func:`rank_by_mean_abs_rs`)."""


def _round_value(v, nd: int):
    v = float(v)
    return round(v, nd) if math.isfinite(v) else v


def round_descriptors(descriptors: pd.DataFrame, decimals: dict | None = None) -> pd.DataFrame:
    """A copy of a descriptor table with each descriptor rounded as the authors do.

    Python's built-in ``round`` (correctly rounded, ties to even on the binary value), as their
    ``round(zcr, 4)`` …, not ``numpy.round`` (which scales by 10^n first and can differ at ties).

    Parameters
    ----------
    descriptors : pandas.DataFrame
        ``descriptors/acoustic_descriptors.csv`` (any index; columns named as
        :data:`aiplib.io.formats.DESCRIPTORS`). Units as stored (Hz for centroid, rolloff and
        bandwidth, dB for contrast).
    decimals : dict, optional
        Column → decimals; default :data:`AUTHORS_DESCRIPTOR_DECIMALS`. Absent columns are
        skipped; NaN and inf are kept.

    Returns
    -------
    pandas.DataFrame
        Same shape, index and columns.
    """
    out = descriptors.copy()
    for col, nd in (AUTHORS_DESCRIPTOR_DECIMALS if decimals is None else decimals).items():
        if col in out.columns:
            out[col] = [_round_value(v, int(nd)) for v in out[col]]
    return out


def rank_by_mean_abs_rs(r_asr: pd.Series, r_kws: pd.Series, *, decimals: int = TOP_RANK_DECIMALS
                        ) -> pd.Series:
    """Descriptors sorted as Figure 2 picks them: mean of |r_s(ASR)| and |r_s(KWS)|, rounded.

    Parameters
    ----------
    r_asr, r_kws : pandas.Series
        r_s per descriptor (index: descriptor names, in table order).
    decimals : int
        The mean is rounded to this many decimals before sorting (the authors': 3), so
        descriptors equal at that precision keep the table order (a stable sort). The rounding
        is ``numpy.round``, as theirs: ``round(np.mean([...]), 3)`` rounds a ``numpy.float64``,
        whose ``__round__`` is ``numpy.round`` (scale by 10^n, round half to even), not Python's
        correctly rounded ``round`` of a float — at a value such as 0.3015 the two give 0.302
        and 0.301.

    Returns
    -------
    pandas.Series
        Rounded mean |r_s| per descriptor, largest first; a descriptor NaN in either task is
        left out.
    """
    m = pd.concat([r_asr.abs(), r_kws.abs()], axis=1).mean(axis=1, skipna=False).dropna()
    m = pd.Series(np.round(m.to_numpy(dtype=float), int(decimals)), index=m.index)
    return m.sort_values(ascending=False, kind="stable")


def unpaired_delta(df: pd.DataFrame, family: str) -> tuple[float, int]:
    """One task's mean degradation the authors' way, without pairing to another task.

    ASR: the mean of the task's own per-row ``delta_wer`` over its noisy rows (each against the
    same task's clean version of the item). KWS: accuracy over all the task's clean rows minus
    accuracy over all its noisy rows (``correct``, unpaired).

    Parameters
    ----------
    df : pandas.DataFrame
        One model's rows of one task's ``results/scores/<task>.csv`` (columns ``bg_id`` and
        ``delta_wer`` for ASR, ``correct`` for KWS). Rows with NaN values (failed generations)
        are left out, as the authors' ``__ERROR__`` rows are.
    family : {"asr", "kws"}

    Returns
    -------
    (float, int)
        Δ as a fraction (NaN when a needed set of rows is empty) and the number of rows used.

    Raises
    ------
    AiplibParameterError
        If ``family`` is unknown or the column is missing.
    """
    family_spec(family)
    col = "delta_wer" if family == "asr" else "correct"
    if col not in df.columns:
        raise AiplibParameterError(f"scores lack the column {col!r} of family {family!r}")
    ok = df[df[col].notna()]
    noisy = ok[ok["bg_id"] != "clean"][col].astype(float)
    if family == "asr":
        return (float(noisy.mean()) if len(noisy) else math.nan), int(len(noisy))
    clean = ok[ok["bg_id"] == "clean"][col].astype(float)
    if not len(clean) or not len(noisy):
        return math.nan, int(len(clean) + len(noisy))
    return float(clean.mean() - noisy.mean()), int(len(clean) + len(noisy))


def unpaired_item_sums(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """Per item, the sums and counts :func:`unpaired_delta` is made of (for a bootstrap).

    Returns
    -------
    pandas.DataFrame
        Index ``item_id``; columns ``clean_sum, clean_n, noisy_sum, noisy_n`` (ASR: clean
        columns 0; the noisy sum is of ``delta_wer``; KWS: of ``correct``).
    """
    col = "delta_wer" if family == "asr" else "correct"
    ok = df[df[col].notna()].assign(_v=lambda d: d[col].astype(float),
                                    _clean=lambda d: d["bg_id"] == "clean")
    g = ok.groupby(["item_id", "_clean"])["_v"].agg(["sum", "size"]).unstack("_clean", fill_value=0)
    out = pd.DataFrame(index=g.index)
    for name, flag in (("clean", True), ("noisy", False)):
        have = ("sum", flag) in g.columns
        out[f"{name}_sum"] = g[("sum", flag)].astype(float) if have else 0.0
        out[f"{name}_n"] = g[("size", flag)].astype(float) if have else 0.0
    if family == "asr":
        out["clean_sum"], out["clean_n"] = 0.0, 0.0
    return out


def delta_from_sums(clean_sum, clean_n, noisy_sum, noisy_n, *, family: str, axis=-1):
    """Δ of :func:`unpaired_delta` from per-item sums (arrays; sums over ``axis``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        noisy = np.sum(noisy_sum, axis) / np.sum(noisy_n, axis)
        if family == "asr":
            return noisy
        return np.sum(clean_sum, axis) / np.sum(clean_n, axis) - noisy
