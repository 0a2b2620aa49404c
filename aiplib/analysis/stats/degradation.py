"""Residual Effect Ratio, per-background degradation and descriptor correlations (part of :mod:`aiplib.analysis.stats`)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from aiplib.analysis.stats.core import (
    MIN_N_FOR_INTERVAL,
    MIN_USABLE_SHARE,
    RER_DENOMINATOR_EPS,
    RER_FLAG_BELOW,
    RER_KWS_SMALL,
)
from aiplib.analysis.stats.exact_tests import bh_adjust
from aiplib.analysis.stats.intervals import _few_note, _percentile_interval
from aiplib.analysis.stats.spearman import _spearman_rows, spearman
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import family_spec
from aiplib.io.formats import DESCRIPTORS


def rer(delta_steer, delta_base, *, task_family: str, usable_only: bool = False):
    """Residual Effect Ratio of the steering prompt, as the authors compute it.

    ``RER = Δ_steer / (Δ_base + 1e-9)`` (:data:`RER_DENOMINATOR_EPS`), where Δ is the mean
    degradation (``delta_wer`` for ASR, ``delta_acc`` = acc(clean) − acc(noisy) for KWS, as
    fractions) with the steering prompt and with the baseline prompt; for KWS, RER = 1.0 when
    ``|Δ_base| <`` :data:`RER_KWS_SMALL` and ``|Δ_steer| <`` :data:`RER_KWS_SMALL` (the
    authors' ``scripts/generate_results_new_2.py``). RER < 1 reads "the prompt removed part of
    the noise effect" only when ``Δ_base`` is clearly positive: see :func:`rer_flag`.

    Parameters
    ----------
    delta_steer, delta_base : float or array-like (broadcastable)
        Mean degradations (fractions: 0.05 = 5 percentage points). NaN in either → NaN.
    task_family : {"asr", "kws"}
    usable_only : bool
        NaN wherever :func:`rer_flag` would flag the baseline (``Δ_base <=`` 0 or below
        :data:`RER_FLAG_BELOW`), except the KWS both-small rule (1.0). Used for bootstrap
        resamples, whose ratio there is meaningless.

    Returns
    -------
    float, or np.ndarray for array input

    Raises
    ------
    AiplibParameterError
        If ``task_family`` is not a family of ``aiplib/core/tasks.yaml`` (``asr``, ``kws``).

    Examples
    --------
    >>> round(rer(0.05, 0.10, task_family="asr"), 6), rer(0.004, -0.003, task_family="kws")
    (0.5, 1.0)
    """
    family_spec(task_family)  # an unknown family raises
    s = np.asarray(delta_steer, dtype=float)
    b = np.asarray(delta_base, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = s / (b + RER_DENOMINATOR_EPS)
    if usable_only:
        r = np.where(b < RER_FLAG_BELOW, np.nan, r)
    if task_family == "kws":
        r = np.where((np.abs(s) < RER_KWS_SMALL) & (np.abs(b) < RER_KWS_SMALL), 1.0, r)
    r = np.where(np.isnan(s) | np.isnan(b), np.nan, r)
    return float(r) if r.ndim == 0 else r


def rer_flag(delta_base) -> str:
    """Why an RER cannot be read as "< 1: the prompt helped" ("" when it can).

    Parameters
    ----------
    delta_base : float
        Mean baseline degradation (fraction).

    Returns
    -------
    str
        ``"baseline <= 0"`` (no degradation to remove: the ratio's sign is inverted, a
        negative RER or one above 1 can mean the prompt helped), ``"baseline < 1 pp"`` (the
        ratio of small numbers is unstable), ``"baseline NaN"`` or ``""``.
    """
    b = float(delta_base)
    if math.isnan(b):
        return "baseline NaN"
    if b <= 0:
        return "baseline <= 0"
    if b < RER_FLAG_BELOW:
        return "baseline < 1 pp"
    return ""


DEGRADATION_METHODS = ("flat", "snr_balanced")
"""Ways :func:`degradation_by_background` averages: ``flat`` (the authors'), ``snr_balanced``."""


def degradation_by_background(scores_df: pd.DataFrame, family: str, *, task: str | None = None,
                              method: str = "flat") -> pd.DataFrame:
    """Mean degradation per background, the authors' way (``flat``) or SNR-balanced.

    ``method="flat"`` is the rule of the authors' ``scripts/generate_results_new_2.py``
    (``load_task_degradations``): the plain mean of the degradation over *all* of a background's
    noisy rows, i.e. ``noisy.groupby("bg_id")[col].mean()``; per model over that model's rows,
    and ``pooled`` over the rows of every model together (the concatenated results), so a model
    or SNR with more scored rows weighs more. ``method="snr_balanced"`` (ours) averages over the
    items at each SNR, then over the SNRs, then (``pooled``) over the models, and gives
    ``pooled`` only for backgrounds every model covers. The two agree when no row is missing.

    Parameters
    ----------
    scores_df : pandas.DataFrame
        A ``results/scores/<task>.csv`` table (columns ``model, task, bg_id, snr_db`` and
        ``delta_wer`` or ``delta_acc``). Clean rows and NaN deltas (failed or missing
        generations) are ignored.
    family : {"asr", "kws"}
        Picks the column (:data:`aiplib.core.tasks.DEGRADATION_COLUMN`): ΔWER, or Δacc = acc(clean)
        − acc(noisy), which is the authors' −Δacc (positive = worse).
    task : str, optional
        Keep only this task. Needed if ``scores_df`` holds several.
    method : {"flat", "snr_balanced"}
        See above (:data:`DEGRADATION_METHODS`).

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, n_models + 1)]
        Index ``bg_id`` (sorted); one column per model and ``pooled``. Values are fractions
        (0.1 = 10 percentage points). ``attrs["partial"]``: ``{bg_id: [models without a row
        of it]}`` (empty dict when every model covers every background); ``attrs["method"]``;
        ``attrs["n_rows"]``: ``{bg_id: scored noisy rows, all models}``. With ``snr_balanced``
        the partial backgrounds' ``pooled`` is NaN (a pooled value never mixes different sets
        of models); with ``flat`` it is the mean over the rows there are, as the authors'.

    Raises
    ------
    AiplibParameterError
        If ``family`` or ``method`` is unknown, the column is missing or several tasks remain.
    """
    col = family_spec(family)["degradation"]["column"]
    if method not in DEGRADATION_METHODS:
        raise AiplibParameterError(f"method must be one of {DEGRADATION_METHODS}, got {method!r}")
    df = scores_df
    if task is not None and "task" in df.columns:
        df = df[df["task"] == task]
    if "task" in df.columns and df["task"].nunique() > 1:
        raise AiplibParameterError(f"scores hold several tasks {sorted(df['task'].unique())}; "
                                   "pass task=")
    if col not in df.columns:
        raise AiplibParameterError(f"scores lack the column {col!r} of family {family!r}")
    df = df[(df["bg_id"] != "clean") & df[col].notna()]
    if method == "flat":
        per_bg = df.groupby(["model", "bg_id"])[col].mean().unstack("model")
    else:
        per_snr = df.groupby(["model", "bg_id", "snr_db"])[col].mean()
        per_bg = per_snr.groupby(level=["model", "bg_id"]).mean().unstack("model")
    per_bg.columns = [str(c) for c in per_bg.columns]
    per_bg.columns.name = None
    per_bg = per_bg.sort_index()
    models = list(per_bg.columns)
    complete = per_bg[models].notna().all(axis=1)
    if method == "flat":
        per_bg["pooled"] = df.groupby("bg_id")[col].mean().reindex(per_bg.index)
    else:
        per_bg["pooled"] = per_bg[models].mean(axis=1).where(complete)
    per_bg.index.name = "bg_id"
    per_bg.attrs["partial"] = {str(bg): [m for m in models if pd.isna(per_bg.at[bg, m])]
                               for bg in per_bg.index[~complete]}
    per_bg.attrs["method"] = method
    per_bg.attrs["n_rows"] = {str(k): int(v) for k, v in df.groupby("bg_id").size().items()}
    return per_bg


WORST_STIMULI_COLUMNS = ["model", "task", "stimulus_id", "item_id", "bg_id", "snr_db", "reference",
                         "clean_response", "response", "clean_score", "score", "delta"]
"""Columns of :func:`worst_stimuli`, in order."""


def worst_stimuli(scores_df: pd.DataFrame, family: str, n: int = 10, *, model: str | None = None,
                  one_per_item: bool = True) -> pd.DataFrame:
    """The stimuli that hurt most: the one ranking of the report (notebook 09) and the explorer.

    A stimulus counts when its degradation against the clean version of the same item is
    positive (``delta_wer`` > 0 for ASR; for KWS ``delta_acc`` = 1, a flip: correct when clean,
    wrong with the background). Largest degradation first; ties go to the higher SNR (a loss at
    10 dB says more than at 0 dB), then model and stimulus id.

    Parameters
    ----------
    scores_df : pandas.DataFrame
        One task's ``results/scores/<task>.csv`` (:func:`aiplib.io.formats.read_scores`).
    family : {"asr", "kws"}
        Picks the degradation column (:data:`aiplib.core.tasks.DEGRADATION_COLUMN`).
    n : int >= 1
        How many rows at most.
    model : str, optional
        Only this model (default: every model of the table).
    one_per_item : bool
        Keep only each item's worst stimulus (default), so the list shows different items.

    Returns
    -------
    pandas.DataFrame [shape=(<= n, 12)]
        Columns :data:`WORST_STIMULI_COLUMNS`: ``model, task, stimulus_id, item_id, bg_id``,
        ``snr_db`` (dB), ``reference`` (ASR transcript or KWS label), ``clean_response`` (the
        same model's answer to the clean version, "" when missing), ``response``,
        ``clean_score`` / ``score`` (WER as a fraction, or KWS correct 0/1; NaN when missing),
        ``delta`` (ΔWER as a fraction, or Δacc = 1). Empty, with these columns, when nothing got
        worse or the column is missing.

    Raises
    ------
    AiplibParameterError
        If ``family`` is unknown or ``n < 1``.
    """
    col = family_spec(family)["degradation"]["column"]
    if int(n) < 1:
        raise AiplibParameterError(f"n must be at least 1, got {n}")
    if scores_df is None or scores_df.empty or col not in scores_df.columns:
        return pd.DataFrame(columns=WORST_STIMULI_COLUMNS)
    df = scores_df if model is None else scores_df[scores_df["model"].astype(str) == model]
    df = df[(df["bg_id"] != "clean") & (df[col] > 0)]
    df = df.sort_values([col, "snr_db", "model", "stimulus_id"], ascending=[False, False, True, True],
                        kind="stable")
    if one_per_item:
        df = df.drop_duplicates("item_id", keep="first")
    df = df.head(int(n))
    key = ["model", "task", "item_id"]
    clean = scores_df[scores_df["bg_id"] == "clean"].drop_duplicates(key, keep="last").set_index(key)
    at = pd.MultiIndex.from_frame(df[key])
    score_col, ref_col = ("wer", "reference") if family == "asr" else ("correct", "label")

    def column(frame, name, default):
        return frame[name].to_numpy() if name in frame.columns else default

    out = pd.DataFrame({
        "model": df["model"].astype(str).to_numpy(), "task": df["task"].to_numpy(),
        "stimulus_id": df["stimulus_id"].to_numpy(), "item_id": df["item_id"].astype(str).to_numpy(),
        "bg_id": df["bg_id"].astype(str).to_numpy(), "snr_db": df["snr_db"].to_numpy(),
        "reference": column(df, ref_col, ""),
        "clean_response": column(clean.reindex(at), "response", ""),
        "response": column(df, "response", ""),
        "clean_score": column(clean.reindex(at), score_col, math.nan),
        "score": df[score_col].to_numpy(), "delta": df[col].to_numpy()})
    out["clean_response"] = out["clean_response"].where(out["clean_response"].notna(), "")
    return out[WORST_STIMULI_COLUMNS]


def partial_note(partial: dict, method: str = "snr_balanced") -> str:
    """Text for ``attrs["partial"]`` of :func:`degradation_by_background` ("" when empty).

    ``method`` is the table's ``attrs["method"]``: ``snr_balanced`` leaves the partial
    backgrounds out of ``pooled``; ``flat`` pools the rows there are (the authors' rule).
    """
    if not partial:
        return ""
    names = ", ".join(f"{bg} (missing {', '.join(ms)})" for bg, ms in sorted(partial.items()))
    if method == "flat":
        return f"{len(partial)} backgrounds pooled over the models that have rows: {names}"
    return f"pooled only over backgrounds every model covers; {len(partial)} partial left out: {names}"


def descriptor_correlations(degradation: pd.DataFrame, descriptors_df: pd.DataFrame, *,
                            descriptors=None, n_resamples: int = 2000, seed: int = 0,
                            level: float = 0.95) -> pd.DataFrame:
    """Spearman ρ of each descriptor against degradation across backgrounds, with CIs and BH.

    Parameters
    ----------
    degradation : pandas.DataFrame [shape=(n_backgrounds, n_columns)]
        Index ``bg_id``; columns are models and/or ``pooled`` (as returned by
        :func:`degradation_by_background`).
    descriptors_df : pandas.DataFrame [shape=(n_backgrounds, ...)]
        ``descriptors/acoustic_descriptors.csv``: a ``bg_id`` column (or index) and the
        descriptor columns.
    descriptors : sequence of str, optional
        Columns to use; default those of :data:`DESCRIPTORS` present (else every numeric column).
    n_resamples : int
        Bootstrap resamples of the *backgrounds* (descriptor and degradation resampled together).
    seed : int
        Every (model, descriptor) cell uses ``default_rng(seed)`` afresh, so a cell's interval
        does not depend on which other cells are computed.
    level : float

    Returns
    -------
    pandas.DataFrame, long format
        Columns ``model, descriptor, n, r_s, p, p_method, n_permutations, ci_low, ci_high,
        ci_usable, p_bh, level, n_resamples, seed, note``: one row per (column of
        ``degradation``, descriptor). ``p`` is exact / permutation / t-approximation by ``n``
        (:func:`spearman`; ``p_method``, ``n_permutations``); ``p_bh`` is the
        Benjamini–Hochberg adjustment of those p-values across the descriptors within each
        model column. ``ci_low/ci_high`` are percentile bootstrap bounds over backgrounds;
        ``ci_usable`` counts the resamples where neither column was constant. No interval
        (NaN, noted) with fewer than :data:`MIN_N_FOR_INTERVAL` backgrounds or fewer than
        :data:`MIN_USABLE_SHARE` of the resamples usable.

    Raises
    ------
    AiplibParameterError
        If ``descriptors_df`` has no ``bg_id`` or a requested descriptor is missing.
    """
    d = descriptors_df.copy()
    if "bg_id" in d.columns:
        d = d.set_index("bg_id")
    elif d.index.name != "bg_id":
        raise AiplibParameterError("descriptors_df needs a bg_id column or index")
    if descriptors is None:
        descriptors = [c for c in DESCRIPTORS if c in d.columns] or \
            [c for c in d.columns if pd.api.types.is_numeric_dtype(d[c])]
    missing = [c for c in descriptors if c not in d.columns]
    if missing:
        raise AiplibParameterError(f"descriptors_df lacks {missing}; has {list(d.columns)}")
    pnote = partial_note(degradation.attrs.get("partial") or {},
                         degradation.attrs.get("method", "snr_balanced"))
    deg = degradation.copy()
    deg.index = deg.index.astype(str)
    d.index = d.index.astype(str)
    common = deg.index.intersection(d.index)
    only = sorted(set(deg.index) ^ set(d.index))
    base_note = f"{len(only)} backgrounds without both values ignored" if only else ""
    rows = []
    for model in deg.columns:
        y_all = deg.loc[common, model].to_numpy(dtype=float)
        cell_rows = []
        for desc in descriptors:
            x_all = d.loc[common, desc].to_numpy(dtype=float)
            res = spearman(x_all, y_all, seed=seed)
            ok = np.isfinite(x_all) & np.isfinite(y_all)
            x, y = x_all[ok], y_all[ok]
            lo = hi = math.nan
            usable = 0
            notes = [n for n in (base_note, pnote if model == "pooled" else "", res.note) if n]
            if np.isfinite(res.rho):
                if x.size < MIN_N_FOR_INTERVAL:
                    notes.append(_few_note(x.size, MIN_N_FOR_INTERVAL))
                else:
                    rng = np.random.default_rng(seed)
                    idx = rng.integers(0, x.size, size=(int(n_resamples), x.size))
                    boot = _spearman_rows(x[idx], y[idx])
                    lo, hi, usable, bnote = _percentile_interval(boot, level, MIN_USABLE_SHARE)
                    if bnote:
                        notes.append(bnote.replace("unusable", "with a constant column"))
            cell_rows.append({"model": model, "descriptor": desc, "n": res.n, "r_s": res.rho,
                              "p": res.p, "p_method": res.method,
                              "n_permutations": res.n_permutations, "ci_low": lo,
                              "ci_high": hi, "ci_usable": int(usable), "level": level,
                              "n_resamples": int(n_resamples), "seed": int(seed),
                              "note": "; ".join(notes)})
        padj = bh_adjust([r["p"] for r in cell_rows])
        for r, q in zip(cell_rows, padj):
            r["p_bh"] = float(q)
        rows.extend(cell_rows)
    cols = ["model", "descriptor", "n", "r_s", "p", "p_method", "n_permutations", "ci_low",
            "ci_high", "ci_usable", "p_bh", "level", "n_resamples", "seed", "note"]
    return pd.DataFrame(rows, columns=cols)
