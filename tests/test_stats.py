"""Tests of aiplib.analysis.stats against hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from aiplib.analysis import stats
from aiplib.core.errors import AiplibParameterError
from aiplib.io import formats


# ----------------------------------------------------------------------------- Spearman
def test_spearman_monotone():
    rho, p = stats.spearman([1, 2, 3, 4, 5], [10, 20, 25, 100, 1000])
    assert rho == pytest.approx(1.0) and p < 0.05
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]).rho == pytest.approx(-1.0)


def test_spearman_hand_computed():
    # d = (-1, 1, -1, 1, 0), Σd² = 4, ρ = 1 − 6·4 / (5·(25 − 1)) = 0.8
    r = stats.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert r.rho == pytest.approx(0.8) and r.n == 5 and r.note == ""


def test_spearman_constant_column_is_nan_with_note():
    r = stats.spearman([1, 2, 3, 4], [5, 5, 5, 5])
    assert math.isnan(r.rho) and math.isnan(r.p)
    assert "constant" in r.note


def test_spearman_small_n_exact_p():
    # one adjacent swap at n = 6: ρ = 1 − 6·2 / (6·35); |ρ| ≥ that in 12 of 720 permutations
    r = stats.spearman([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5])
    assert r.rho == pytest.approx(0.9428571428571)
    assert r.p == pytest.approx(12 / 720) and round(r.p, 4) == 0.0167
    assert (r.method, r.n_permutations) == ("exact", 720)
    from scipy.stats import spearmanr
    assert spearmanr([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5]).pvalue == pytest.approx(0.0048,
                                                                                      abs=1e-4)


def test_spearman_exact_matches_scipy_permutation_test():
    from scipy.stats import permutation_test, rankdata
    x = np.array([3.0, 1, 4, 1, 5, 9, 2, 6])                  # with a tie
    y = np.array([2.0, 7, 1, 8, 2, 8, 1, 8])
    rx = rankdata(x) - rankdata(x).mean()

    def rho(yy, axis=-1):
        ry = rankdata(yy, axis=-1)
        ry = ry - ry.mean(axis=-1, keepdims=True)
        return (ry * rx).sum(-1) / np.sqrt((rx * rx).sum() * (ry * ry).sum(-1))

    ref = permutation_test((y,), lambda yy, axis=-1: np.abs(rho(yy, axis)),
                           permutation_type="pairings", n_resamples=np.inf, vectorized=True,
                           alternative="greater")
    r = stats.spearman(x, y)
    assert r.method == "exact" and r.p == pytest.approx(ref.pvalue)


def test_spearman_permutation_for_n_up_to_20_seeded():
    rng = np.random.default_rng(5)
    x = np.arange(20.0)
    y = x + rng.normal(0, 6, 20)                             # ρ = 0.671
    a, b = stats.spearman(x, y, seed=1), stats.spearman(x, y, seed=1)
    assert a == b and a.method == "permutation" and a.n_permutations == 9999
    from scipy.stats import spearmanr
    approx = spearmanr(x, y).pvalue                           # 0.0012
    assert a.p == pytest.approx(0.0024) and a.p > 1.5 * approx   # the approximation is too small
    assert abs(a.p - stats.spearman(x, y, seed=2).p) < 0.001
    big = stats.spearman(np.arange(25.0), np.arange(25.0) ** 2)
    assert big.method == "t_approx" and big.n_permutations == 0


def test_spearman_drops_nan_pairs_and_needs_three():
    r = stats.spearman([1, 2, np.nan, 4, 5], [1, 2, 3, 4, 5])
    assert r.n == 4 and r.rho == pytest.approx(1.0) and "NaN" in r.note
    assert math.isnan(stats.spearman([1, 2], [1, 2]).rho)
    with pytest.raises(AiplibParameterError, match="differ in length"):
        stats.spearman([1, 2, 3], [1, 2])


# ---------------------------------------------------------------------------- bootstrap
def test_bootstrap_reproducible_and_covers_mean():
    x = np.random.default_rng(1).normal(size=50)
    a = stats.bootstrap_ci(x, np.mean, n_resamples=500, seed=7)
    b = stats.bootstrap_ci(x, np.mean, n_resamples=500, seed=7)
    c = stats.bootstrap_ci(x, np.mean, n_resamples=500, seed=7, vectorized=True)
    assert a == b
    assert (a.ci_low, a.ci_high) == pytest.approx((c.ci_low, c.ci_high))
    assert a.ci_low < x.mean() < a.ci_high
    assert a.estimate == pytest.approx(x.mean())
    assert (a.seed, a.n_resamples, a.n_valid, a.n) == (7, 500, 500, 50)
    d = stats.bootstrap_ci(x, np.mean, n_resamples=500, seed=8)
    assert (d.ci_low, d.ci_high) != (a.ci_low, a.ci_high)


def test_bootstrap_paired_ratio():
    e, w = np.array([1.0, 2, 3, 4]), np.array([2.0, 4, 6, 8])   # ratio 0.5 in every resample
    r = stats.bootstrap_ci((e, w), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis),
                           n_resamples=200, vectorized=True, min_n=1)
    assert r.estimate == 0.5 and r.ci_low == pytest.approx(0.5) and r.ci_high == pytest.approx(0.5)
    with pytest.raises(AiplibParameterError, match="differ in length"):
        stats.bootstrap_ci((e, w[:3]), lambda a, b: 0)


def test_bootstrap_constant_data():
    r = stats.bootstrap_ci(np.full(5, 2.0), np.mean, n_resamples=100, min_n=1)
    assert r.ci_low == r.ci_high == r.estimate == 2.0


def test_bootstrap_refuses_interval_below_min_n():
    # a 2-item group: the "interval" would only be the range of the two values
    r = stats.bootstrap_ci(np.array([4.4, 6.9]), np.mean, n_resamples=100)
    assert r.estimate == pytest.approx(5.65)
    assert math.isnan(r.ci_low) and math.isnan(r.ci_high) and r.n_valid == 0
    assert f"< {stats.MIN_N_FOR_INTERVAL}: no interval" in r.note
    assert stats.MIN_N_FOR_INTERVAL == 10


def test_bootstrap_counts_usable_and_refuses_below_95_percent():
    # ratio with a zero denominator in some resamples: only items 0..8 have a denominator
    num = np.arange(1.0, 13.0)
    den = np.r_[np.ones(2), np.zeros(10)]
    f = lambda a, b, axis=-1: a.sum(axis) / b.sum(axis)  # noqa: E731
    r = stats.bootstrap_ci((num, den), f, n_resamples=1000, seed=0, vectorized=True)
    # P(no resample draws item 0 or 1) = (10/12)**12 = 11.2 %: > 5 % unusable → refused
    assert 0.08 * 1000 < 1000 - r.n_valid < 0.15 * 1000
    assert math.isnan(r.ci_low) and "usable (< 95 %)" in r.note
    ok = stats.bootstrap_ci((num, np.ones(12)), f, n_resamples=1000, vectorized=True)
    assert ok.n_valid == 1000 and np.isfinite(ok.ci_low)


# -------------------------------------------------------------------------------- tests
def test_sign_test_exact():
    r = stats.sign_test([1] * 9 + [-1])
    assert r.p == pytest.approx(0.021484375)       # 2 · (1 + 10) / 2**10
    assert (r.n_pos, r.n_neg, r.n_ties, r.n) == (9, 1, 0, 10)
    r = stats.sign_test([0.3] * 9 + [-0.1, 0, 0, np.nan])   # ties and NaN dropped
    assert r.p == pytest.approx(0.021484375) and r.n_ties == 2
    assert math.isnan(stats.sign_test([0, 0]).p)


def test_mcnemar_exact():
    clean = [1] * 10 + [0] * 2 + [1] * 5
    noisy = [0] * 10 + [1] * 2 + [1] * 5
    r = stats.mcnemar_exact(clean, noisy)
    assert (r.n_pos, r.n_neg, r.n_ties) == (10, 2, 5)
    # exact two-sided binomial: 2 · P(X ≤ 2 | n = 12, p = 0.5) = 2 · (1 + 12 + 66) / 4096
    assert r.p == pytest.approx(2 * 79 / 4096)
    assert math.isnan(stats.mcnemar_exact([1, 0], [1, 0]).p)


def test_bh_adjust_hand_computed_and_nan_safe():
    p = [0.01, np.nan, 0.04, 0.03, 0.2]
    # finite sorted: .01 .03 .04 .2 (m = 4): 4·.01/1 = .04; 4·.03/2 = .06; 4·.04/3 = .0533;
    # 4·.2/4 = .2; step-up minimum: .04, .0533, .0533, .2
    q = stats.bh_adjust(p)
    assert np.isnan(q[1])
    assert q[[0, 3, 2, 4]] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert stats.bh_adjust([]).shape == (0,)
    with pytest.raises(AiplibParameterError):
        stats.bh_adjust([1.5])


# ----------------------------------------------------------------------------------- RER
def test_rer_paper_definition():
    # RER = Δ_steer / (Δ_base + 1e-9), as the authors' generate_results_new_2.py
    assert stats.rer(0.05, 0.10, task_family="asr") == pytest.approx(0.5)
    assert stats.rer(0.15, 0.10, task_family="kws") == pytest.approx(1.5)
    assert stats.rer(0.005, 0.002, task_family="asr") == pytest.approx(2.5)   # no NaN rule
    assert stats.rer(0.05, 0.002, task_family="kws") == pytest.approx(25.0)
    assert stats.rer(0.005, 0.002, task_family="kws") == 1.0       # |both| < 0.01
    assert stats.rer(0.004, -0.003, task_family="kws") == 1.0
    assert stats.rer(-0.02, 0.0, task_family="kws") == pytest.approx(-0.02 / 1e-9)
    assert math.isnan(stats.rer(np.nan, 0.1, task_family="asr"))
    np.testing.assert_allclose(stats.rer([0.05, 0.0], [0.1, 0.1], task_family="kws"),
                               [0.5, 0.0], atol=1e-8)
    u = stats.rer([0.05, 0.05, 0.005], [0.1, 0.005, 0.002], task_family="kws", usable_only=True)
    assert u[0] == pytest.approx(0.5) and math.isnan(u[1]) and u[2] == 1.0
    with pytest.raises(AiplibParameterError):
        stats.rer(0.1, 0.1, task_family="mt")


def test_rer_flag():
    assert stats.rer_flag(0.10) == ""
    assert stats.rer_flag(0.005) == "baseline < 1 pp"
    assert stats.rer_flag(0.0) == stats.rer_flag(-0.03) == "baseline <= 0"
    assert stats.rer_flag(np.nan) == "baseline NaN"


# --------------------------------------------------------------------- tables
def _scores():
    rows = []
    for m, scale in (("m1", 1.0), ("m2", 3.0)):
        for item in ("i1", "i2"):
            rows.append(dict(model=m, task="asr", item_id=item, bg_id="clean", snr_db=np.nan,
                             delta_wer=np.nan))
            for bg, base in (("a", 0.1), ("b", 0.2)):
                for snr, k in ((10, 1.0), (0, 3.0)):
                    rows.append(dict(model=m, task="asr", item_id=item, bg_id=bg, snr_db=snr,
                                     delta_wer=base * k * scale))
    return pd.DataFrame(rows)


def test_degradation_by_background():
    d = stats.degradation_by_background(_scores(), "asr")
    assert list(d.columns) == ["m1", "m2", "pooled"] and list(d.index) == ["a", "b"]
    # bg a, m1: mean over SNRs of (0.1, 0.3) = 0.2; m2: 0.6; pooled 0.4
    assert d.loc["a"].tolist() == pytest.approx([0.2, 0.6, 0.4])
    assert d.loc["b"].tolist() == pytest.approx([0.4, 1.2, 0.8])
    assert d.attrs["partial"] == {}
    with pytest.raises(AiplibParameterError):
        stats.degradation_by_background(_scores(), "kws")


def test_flat_mean_over_rows_is_the_authors_rule_and_balanced_stays_beside():
    s = _scores()
    # one failed generation: m1, item i1, background a, 0 dB (its delta is NaN)
    gone = (s.model == "m1") & (s.item_id == "i1") & (s.bg_id == "a") & (s.snr_db == 0)
    s.loc[gone, "delta_wer"] = np.nan
    flat = stats.degradation_by_background(s, "asr")
    bal = stats.degradation_by_background(s, "asr", method="snr_balanced")
    assert flat.attrs["method"] == "flat" and bal.attrs["method"] == "snr_balanced"
    # by hand, bg a: m1 rows 0.1, 0.1, 0.3 (i2 at 0 dB) → flat 0.5/3; m2 rows 0.3, 0.9, 0.3, 0.9
    assert flat.loc["a", "m1"] == pytest.approx(0.5 / 3)
    assert flat.loc["a", "m2"] == pytest.approx(0.6)
    # pooled = groupby("bg_id").mean() over both models' 7 rows, not the mean of the two columns
    assert flat.loc["a", "pooled"] == pytest.approx((0.5 + 2.4) / 7)
    assert flat.attrs["n_rows"] == {"a": 7, "b": 8}
    # ours: per SNR, then over SNRs: m1 = mean(0.1, 0.3) = 0.2, then over models (0.2 + 0.6) / 2
    assert bal.loc["a", "m1"] == pytest.approx(0.2) and bal.loc["a", "pooled"] == pytest.approx(0.4)
    assert flat.loc["b"].tolist() == pytest.approx(bal.loc["b"].tolist())   # no row missing
    with pytest.raises(AiplibParameterError, match="method"):
        stats.degradation_by_background(s, "asr", method="median")


def test_flat_pooled_uses_the_models_there_are():
    s = _scores()
    s = s[~((s.model == "m2") & (s.bg_id == "b"))]          # m2 never ran background b
    d = stats.degradation_by_background(s, "asr")
    assert d.loc["b", "pooled"] == pytest.approx(0.4) and math.isnan(d.loc["b", "m2"])
    assert d.attrs["partial"] == {"b": ["m2"]}
    assert "pooled over the models that have rows: b (missing m2)" in \
        stats.partial_note(d.attrs["partial"], d.attrs["method"])


def test_pooled_degradation_only_over_backgrounds_every_model_covers():
    s = _scores()
    s = s[~((s.model == "m2") & (s.bg_id == "b"))]          # m2 never ran background b
    d = stats.degradation_by_background(s, "asr", method="snr_balanced")
    assert d.loc["a", "pooled"] == pytest.approx(0.4)        # both models
    assert math.isnan(d.loc["b", "pooled"])                  # not m1's value alone
    assert d.loc["b", "m1"] == pytest.approx(0.4)
    assert d.attrs["partial"] == {"b": ["m2"]}
    assert "b (missing m2)" in stats.partial_note(d.attrs["partial"])


def test_descriptor_correlations_long_table():
    bgs = [f"bg{i:02d}" for i in range(20)]
    deg = pd.DataFrame({"m1": np.arange(20.0), "pooled": np.arange(20.0) ** 2},
                       index=pd.Index(bgs, name="bg_id"))
    rng = np.random.default_rng(0)
    desc = pd.DataFrame({"bg_id": bgs, **{d: rng.normal(size=20) for d in formats.DESCRIPTORS}})
    desc["zcr"] = np.arange(20.0)[::-1]            # perfectly anti-monotone
    desc["rms_variance"] = 1.0                     # constant
    t = stats.descriptor_correlations(deg, desc, n_resamples=300, seed=3)
    assert t.shape == (18, 15)
    assert (t.loc[t.r_s.notna(), "p_method"] == "permutation").all()
    assert (t.loc[t.r_s.notna(), "ci_usable"] == 300).all()
    z = t[(t.model == "m1") & (t.descriptor == "zcr")].iloc[0]
    assert z.r_s == pytest.approx(-1.0) and z.ci_low == pytest.approx(-1.0)
    rv = t[t.descriptor == "rms_variance"]
    assert rv["r_s"].isna().all() and rv["p_bh"].isna().all()
    assert rv["note"].str.contains("constant").all()
    for m in ("m1", "pooled"):
        sub = t[t.model == m]
        np.testing.assert_allclose(sub["p_bh"], stats.bh_adjust(sub["p"]))
    assert (t["seed"] == 3).all() and (t["n_resamples"] == 300).all()
    t2 = stats.descriptor_correlations(deg, desc, n_resamples=300, seed=3)
    pd.testing.assert_frame_equal(t, t2)
