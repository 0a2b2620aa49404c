"""Tests of aiplib.analysis.conditions against hand-computed values (issue 7, "Done when")."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from authors_schema import inference_line, write_jsonl, write_manifest

from aiplib.analysis import conditions as cond
from aiplib.analysis import stats
from aiplib.core.errors import AiplibParameterError
from aiplib.core.workspace import workspace
from aiplib.io.formats import load_scores
from aiplib.scoring.score import score_inference, wer_details


def _sid(fam, item, bg, snr):
    return f"{fam}__{item}__{bg}__" + ("clean" if snr is None else f"snr{snr:+03d}")


def make_ws(root, asr=(), kws=()):
    """A workspace whose scores come from explicit rows.

    ``asr``: tuples (item, reference, {(bg, snr): response}) with (\"clean\", None) for clean;
    ``kws``: tuples (item, label, {(bg, snr): response}). One model ``m``. Written in the authors'
    schema (ids ``<item>_clean`` / ``<item>_<bg>_snr<N>``).
    """
    ws = workspace("demo", data_root=root)
    for fam, spec in (("asr", asr), ("kws", kws)):
        man, resps = [], []
        for item, ref, resp in spec:
            for (bg, snr), r in resp.items():
                man.append({"item_id": item, "bg_id": bg, "snr_db": snr, "reference": ref,
                            "is_target": fam == "kws" and ref in ("yes", "no", "go"), "accent_group": ""})
                resps.append(r)
        if man:
            rows = write_manifest(ws, fam, man).to_dict("records")
            write_jsonl(ws.inference / "m" / f"{fam}.jsonl",
                        [inference_line(row, model="m", task=fam, response=r, prompt_id="p")
                         for row, r in zip(rows, resps)])
    score_inference(ws)
    return ws


def _row(t, scope="condition", bg=None, snr=None):
    sel = t["scope"] == scope
    if bg is not None:
        sel &= t["bg_id"] == bg
    if snr is not None:
        sel &= t["snr_db"] == snr
    assert sel.sum() == 1, t[sel]
    return t[sel].iloc[0]


# ------------------------------------------------------------------------ S/D/I, corpus vs mean
def test_sdi_split_of_a_b_c_vs_a_x_c_d(tmp_path):
    ws = make_ws(tmp_path, asr=[("u1", "a b c", {("clean", None): "a b c",
                                                 ("bg1", 0): "a x c d"})])
    t = cond.condition_table(load_scores(ws)["asr"], "asr", n_resamples=200)
    r = _row(t, bg="bg1", snr=0)
    # 1 substitution, 0 deletions, 1 insertion over 3 reference words: WER 2/3
    assert r.sub_pp == pytest.approx(100 / 3)
    assert r.del_pp == 0
    assert r.ins_pp == pytest.approx(100 / 3)
    assert r.wer_pp == pytest.approx(200 / 3) == r.sub_pp + r.del_pp + r.ins_pp
    assert r.mean_wer_pp == pytest.approx(200 / 3)
    assert r.clean_wer_pp == 0 and r.delta_pp == pytest.approx(200 / 3)
    assert r.cer_pp == pytest.approx(100 * wer_details(["a b c"], ["a x c d"])["cer"])
    c = _row(t, scope="clean")
    assert c.wer_pp == 0 and c.cer_pp == 0 and math.isnan(c.delta_pp)


def test_corpus_vs_mean_wer_differ(tmp_path):
    # u1: 0 errors / 4 words; u2: 1 S + 1 I / 1 word → corpus 2/5, mean (0 + 2) / 2 = 1
    ws = make_ws(tmp_path, asr=[
        ("u1", "a b c d", {("clean", None): "a b c d", ("bg1", 0): "a b c d"}),
        ("u2", "e", {("clean", None): "e", ("bg1", 0): "f g"})])
    t = cond.condition_table(load_scores(ws)["asr"], "asr", n_resamples=200)
    r = _row(t, bg="bg1", snr=0)
    assert r.wer_pp == pytest.approx(40.0)
    assert r.mean_wer_pp == pytest.approx(100.0)
    assert r.delta_pp == pytest.approx(100.0)            # mean of the per-item ΔWER (0, 2)
    assert r.delta_corpus_pp == pytest.approx(40.0)      # (2 − 0) / 5 words
    assert (r.sub_pp, r.del_pp, r.ins_pp) == pytest.approx((20.0, 0.0, 20.0))
    d = wer_details(["a b c d", "e"], ["a b c d", "f g"])
    assert r.cer_pp == pytest.approx(100 * d["cer"])


# ------------------------------------------------------------------------------- exact tests
def test_sign_test_p_value_exact(tmp_path):
    # 9 items get worse, 1 gets better: p = 2 · (1 + 10) / 2**10
    asr = []
    for i in range(10):
        clean, noisy = ("a b c d", "a b x d") if i < 9 else ("a x c d", "a b c d")
        asr.append((f"u{i}", "a b c d", {("clean", None): clean, ("bg1", 5): noisy}))
    ws = make_ws(tmp_path, asr=asr)
    t = cond.condition_table(load_scores(ws)["asr"], "asr", n_resamples=300)
    r = _row(t, bg="bg1", snr=5)
    assert r.test == "sign"
    assert r.p_value == pytest.approx(0.021484375)
    assert (r.n_worse, r.n_better, r.n_ties) == (9, 1, 0)
    assert r.delta_pp == pytest.approx(100 * (9 * 0.25 - 0.25) / 10)


def test_kws_mcnemar_exact_and_aggregates(tmp_path):
    # 10 items clean-right/noisy-wrong, 2 clean-wrong/noisy-right, 5 right in both
    kws = []
    for i in range(17):
        if i < 10:
            c, n = "yes", "no"
        elif i < 12:
            c, n = "no", "yes"
        else:
            c, n = "yes", "yes"
        kws.append((f"k{i:02d}", "yes", {("clean", None): c, ("bg1", 0): n, ("bg2", 0): c}))
    ws = make_ws(tmp_path, kws=kws)
    t = cond.condition_table(load_scores(ws)["kws"], "kws", n_resamples=300)
    r = _row(t, bg="bg1", snr=0)
    assert r.test == "mcnemar_exact"
    assert r.p_value == pytest.approx(2 * 79 / 4096)      # 2 · P(X ≤ 2 | 12, ½)
    assert (r.n_worse, r.n_better, r.n_ties) == (10, 2, 5)
    assert r.acc_pp == pytest.approx(100 * 7 / 17)
    assert r.clean_acc_pp == pytest.approx(100 * 15 / 17)
    assert r.delta_pp == pytest.approx(100 * 8 / 17)
    assert r.verdict == "worse"
    assert _row(t, bg="bg2", snr=0).delta_pp == 0
    s = _row(t, scope="snr", snr=0)                        # pooled over bg1 and bg2
    assert s.bg_id == "all" and s.n_stimuli == 34 and s.n_items == 17
    assert s.test == "sign_item_means" and s.delta_pp == pytest.approx(100 * 8 / 34)
    assert s.p_value == pytest.approx(stats.sign_test([0.5] * 10 + [-0.5] * 2).p)


# -------------------------------------------------------------------------------- bootstrap
def test_paired_change_bootstrap_reproducible_and_covers_truth():
    rng = np.random.default_rng(42)
    true = 5.0
    d = true + rng.normal(scale=4.0, size=40)
    n = np.ones_like(d)
    a = cond.paired_change(d, n, n_resamples=1000, seed=11)
    b = cond.paired_change(d, n, n_resamples=1000, seed=11)
    assert a == b                                          # fixed seed → same interval
    c = cond.paired_change(d, n, n_resamples=1000, seed=12)
    assert (c["ci_low"], c["ci_high"]) != (a["ci_low"], a["ci_high"])
    assert a["ci_low"] < true < a["ci_high"]
    ref = stats.bootstrap_ci(d, np.mean, n_resamples=1000, seed=11)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((ref.ci_low, ref.ci_high))
    assert (a["seed"], a["n_resamples"], a["level"]) == (11, 1000, 0.95)
    assert a["verdict"] == "worse" and a["test"] == "sign"
    # coverage over repeated synthetic paired samples is close to the nominal 95 %
    hits = 0
    for k in range(200):
        x = rng.normal(loc=1.0, scale=1.0, size=30)       # clean
        y = x + true + rng.normal(scale=3.0, size=30)     # noisy, same items
        r = cond.paired_change(y - x, np.ones(30), n_resamples=400, seed=k)
        hits += r["ci_low"] <= true <= r["ci_high"]
    assert 0.88 <= hits / 200 <= 0.99


def test_paired_change_clusters_items():
    # item 0 contributes 3 pairs, item 1 one pair: estimate is the mean over pairs
    r = cond.paired_change([3.0, 4.0], [3, 1], n_resamples=200, seed=0)
    assert r["estimate"] == pytest.approx(7 / 4)
    assert r["test"] == "sign_item_means"
    assert cond.paired_change([], [], n_resamples=10)["verdict"] == "n/a"
    one = cond.paired_change([30.0], [3], n_resamples=10)       # one item: no interval
    assert one["estimate"] == 10.0 and math.isnan(one["ci_low"]) and one["verdict"] == "n/a"
    assert "no verdict" in one["note"] and one["ci_usable"] == 0
    with pytest.raises(AiplibParameterError):
        cond.paired_change([1.0, 2.0], [1.0], n_resamples=10)


def test_verdict_rules_and_min_diff():
    assert cond.verdict(5.0, 1.0, 9.0, 2.0, 0.01) == "worse"
    assert cond.verdict(5.0, 1.0, 9.0, 2.0, 0.05) == "same"     # p must be < 0.05
    assert cond.verdict(5.0, 1.0, 9.0, 2.0, math.nan) == "same"
    assert cond.verdict(1.5, 0.5, 2.5, 2.0, 0.01) == "same"     # excludes 0 but below 2 pp
    assert cond.verdict(1.5, 0.5, 2.5, 1.0, 0.01) == "worse"    # configurable minimum
    assert cond.verdict(3.0, -1.0, 7.0, 2.0, 0.01) == "same"    # interval includes 0
    assert cond.verdict(-3.0, -5.0, -1.0, 2.0, 0.01) == "better"
    assert cond.verdict(math.nan, 0, 1, 2.0, 0.01) == "n/a"
    assert cond.verdict(5.0, math.nan, math.nan, 2.0, 0.01) == "n/a"
    with pytest.raises(AiplibParameterError):
        cond.verdict(1, 0, 2, -1, 0.01)


def test_three_items_all_worse_is_not_worse():
    # the percentile interval of 3 identical changes is [50, 50], but sign-test p = 2 / 8
    r = cond.paired_change([50.0, 50.0, 50.0], [1, 1, 1], n_resamples=200, min_items=1)
    assert (r["ci_low"], r["ci_high"]) == (50.0, 50.0)
    assert r["p_value"] == pytest.approx(0.25) and r["verdict"] == "same"
    d = cond.paired_change([50.0, 50.0, 50.0], [1, 1, 1], n_resamples=200)   # the default rule
    assert d["verdict"] == "n/a" and math.isnan(d["ci_low"]) and d["coarse"]


def test_kws_four_worse_none_better_is_not_worse(tmp_path):
    # 4 of 12 clips flip right → wrong, none the other way: McNemar p = 2 / 16 = 0.125
    kws = [(f"k{i:02d}", "yes", {("clean", None): "yes", ("bg1", 0): "no" if i < 4 else "yes"})
           for i in range(12)]
    ws = make_ws(tmp_path, kws=kws)
    t = cond.condition_table(load_scores(ws)["kws"], "kws", n_resamples=500)
    r = _row(t, bg="bg1", snr=0)
    assert r.test == "mcnemar_exact" and r.p_value == pytest.approx(0.125)
    assert r.delta_pp == pytest.approx(100 / 3) and r.ci_low_pp > 0   # interval excludes 0
    assert r.verdict == "same" and r.coarse is True
    assert r.ci_usable == 500


def test_verdict_uses_bh_adjusted_p(tmp_path):
    # bg1: 10 items worse, 2 better (sign p = 0.0386); bg2: 6 / 6 (p = 1): p_BH(bg1) = 0.077
    asr = []
    for i in range(12):
        worse = i < 10
        asr.append((f"u{i:02d}", "a b c d", {("clean", None): "a b c d" if worse else "a b x d",
                                             ("bg1", 0): "a b x d" if worse else "a b c d",
                                             ("bg2", 0): "a b x d" if i % 2 else "a b c d"}))
    ws = make_ws(tmp_path, asr=asr)
    t = cond.condition_table(load_scores(ws)["asr"], "asr", n_resamples=500)
    r = _row(t, bg="bg1", snr=0)
    assert r.p_value == pytest.approx(0.0385742, abs=1e-6)
    assert r.p_bh == pytest.approx(2 * 0.0385742, abs=1e-6)
    assert r.ci_low_pp > 0 and r.delta_pp >= 2
    assert r.verdict == "same"                              # unadjusted it would be "worse"
    assert cond.verdict(r.delta_pp, r.ci_low_pp, r.ci_high_pp, 2.0, r.p_value) == "worse"


def test_robust_view_caps_loops_and_median(tmp_path):
    # noisy WERs 0, 0.5 and 4.0 (a looping hypothesis): mean 150 %, capped mean 50 %, median 50 %
    ws = make_ws(tmp_path, asr=[
        ("u1", "a b", {("clean", None): "a b", ("bg1", 0): "a b"}),
        ("u2", "c d", {("clean", None): "c d", ("bg1", 0): "c"}),
        ("u3", "e", {("clean", None): "e", ("bg1", 0): "e e e e e"})])
    s = load_scores(ws)["asr"]
    t = cond.condition_table(s, "asr", n_resamples=50)
    r = _row(t, bg="bg1", snr=0)
    assert r.mean_wer_pp == pytest.approx(150.0)
    assert r.mean_wer_capped_pp == pytest.approx(50.0) and r.median_wer_pp == pytest.approx(50.0)
    assert r.delta_capped_pp == pytest.approx(50.0)
    assert r.n_loops == 1                                  # "e e e e e" for "e": the scorer flags the loop
    assert math.isnan(_row(cond.condition_table(s.drop(columns="is_loop"), "asr", n_resamples=50),
                           bg="bg1", snr=0).n_loops)   # scores without is_loop: no count
    s["is_loop"] = np.where(s["stimulus_id"].str.startswith("u3_bg1_"), "True", "False")
    r = _row(cond.condition_table(s, "asr", n_resamples=50), bg="bg1", snr=0)
    assert r.n_loops == 1


def test_kws_strict_accuracy_and_non_answers(tmp_path):
    kws = [(f"k{i}", "yes", {("clean", None): "yes", ("bg1", 0): r})
           for i, r in enumerate(["yes", "", "yes", "no"])]
    ws = make_ws(tmp_path, kws=kws)
    s = load_scores(ws)["kws"]
    r = _row(cond.condition_table(s, "kws", n_resamples=50), bg="bg1", snr=0)
    # the scorer marks the empty response as a non-answer (the paper's rule reads it as "silence")
    assert r.non_answer_pp == pytest.approx(25.0)
    assert r.strict_acc_pp == pytest.approx(50.0) and r.acc_pp == pytest.approx(50.0)
    bare = s.drop(columns=["non_answer", "correct_strict"])          # scores without the columns
    r = _row(cond.condition_table(bare, "kws", n_resamples=50), bg="bg1", snr=0)
    assert math.isnan(r.strict_acc_pp) and math.isnan(r.non_answer_pp)
    s["non_answer"] = s["response"].fillna("").eq("")
    s["correct_strict"] = s["correct"].astype(float).astype(bool) & ~s["non_answer"]
    r = _row(cond.condition_table(s, "kws", n_resamples=50), bg="bg1", snr=0)
    assert r.non_answer_pp == pytest.approx(25.0)
    assert r.strict_acc_pp == pytest.approx(50.0) and r.acc_pp == pytest.approx(50.0)


# ---------------------------------------------------------------------------- table layout
def test_scopes_aggregate_and_file(tmp_path):
    asr = []
    for i in range(12):
        resp = {("clean", None): "red green blue pink"}
        for bg in ("b1", "b2"):
            for snr in (10, 0):
                resp[(bg, snr)] = "red green blue" if snr == 0 else "red green blue pink"
        asr.append((f"u{i}", "red green blue pink", resp))
    ws = make_ws(tmp_path, asr=asr)
    written = cond.write_condition_tables(ws, n_resamples=100, seed=3, min_diff_pp=5)
    t = cond.read_condition_tables(ws.results)["asr"]
    assert written["asr"].name == "conditions_asr.csv"
    assert list(t["scope"].drop_duplicates()) == ["clean", "overall", "snr", "background",
                                                  "condition"]
    assert len(t) == 1 + 1 + 2 + 2 + 4
    assert _row(t, "snr", snr=0).wer_pp == pytest.approx(25.0)
    assert _row(t, "snr", snr=10).wer_pp == 0
    assert _row(t, "background", bg="b1").wer_pp == pytest.approx(12.5)
    assert _row(t, "background", bg="b1").condition == "b1 @ all SNRs"
    o = _row(t, "overall")
    assert o.condition == "all @ all SNRs" and o.n_stimuli == 48 and o.del_pp == 12.5
    assert (t["seed"] == 3).all() and (t["n_resamples"] == 100).all()
    assert (t["min_diff_pp"] == 5).all()
    r0 = _row(t, "snr", snr=0)
    assert r0.verdict == "worse"                          # 12 of 12 items +25 pp, CI [25, 25]
    assert r0.p_value == pytest.approx(2 / 4096) and r0.coarse in (True, "True")
    assert _row(t, "snr", snr=10).verdict == "same"


def test_missing_clean_partner_noted(tmp_path):
    ws = make_ws(tmp_path, asr=[
        ("u1", "a b", {("clean", None): "a b", ("bg1", 0): "a"}),
        ("u2", "c d", {("bg1", 0): "c d"})])             # no clean row
    t = cond.condition_table(load_scores(ws)["asr"], "asr", n_resamples=50)
    r = _row(t, bg="bg1", snr=0)
    assert r.n_stimuli == 2 and r.n_pairs == 1 and r.wer_pp == pytest.approx(25.0)
    assert r.delta_pp == pytest.approx(50.0) and "without a clean partner" in r.note


def test_bad_arguments():
    with pytest.raises(AiplibParameterError):
        cond.condition_table(pd.DataFrame({"x": [1]}), "mt")
    with pytest.raises(AiplibParameterError, match="scopes"):
        cond.condition_table(pd.DataFrame({"x": [1]}), "asr", scopes=["nope"])
    with pytest.raises(AiplibParameterError, match="lack columns"):
        cond.condition_table(pd.DataFrame({"model": ["m"]}), "asr")
    assert cond.condition_label("bg1", 5.0) == "bg1 @ 5 dB"
    assert cond.condition_label("all", float("nan")) == "all @ all SNRs"


def test_condition_p_values_are_bh_adjusted_within_scope():
    import numpy as np
    import pandas as pd

    from aiplib.analysis import conditions, stats

    rows = []
    rng = np.random.default_rng(3)
    for item in range(12):
        for bg in ("b1", "b2", "b3"):
            rows.append(dict(model="m", task="asr", stimulus_id=f"asr__i{item}__clean__clean", item_id=f"i{item}",
                             bg_id="clean", snr_db=np.nan, wer=0.1, errors=1, ref_words=10,
                             substitutions=1, deletions=0, insertions=0, hits=9, ref_norm="a b", hyp_norm="a b",
                             accent_group="g"))
            for snr in (0.0, 10.0):
                w = 0.1 + (0.3 if bg == "b1" else 0.0) + rng.normal(0, 0.05)
                rows.append(dict(model="m", task="asr", stimulus_id=f"asr__i{item}__{bg}__{snr}", item_id=f"i{item}",
                                 bg_id=bg, snr_db=snr, wer=w, errors=round(w * 10), ref_words=10,
                                 substitutions=round(w * 10), deletions=0, insertions=0, hits=10 - round(w * 10),
                                 ref_norm="a b", hyp_norm="a b", accent_group="g"))
    df = pd.DataFrame(rows).drop_duplicates("stimulus_id")
    df["delta_wer"] = df["wer"] - 0.1
    t = conditions.condition_table(df, "asr", n_resamples=200)
    cond = t[t["scope"] == "condition"]
    assert np.allclose(cond["p_bh"].to_numpy(float), stats.bh_adjust(cond["p_value"].to_numpy(float)),
                       equal_nan=True)
    assert (cond["p_bh"].dropna() >= cond["p_value"].dropna() - 1e-12).all()


def test_silent_background_rows_counted_and_left_out_on_request(tmp_path):
    # 12 items; on bg1 @ 0 dB items 0-3 had a digitally silent segment (bg_active false): answered
    # like clean; the others lost a word
    spec = [(f"u{i}", "a b c d", {("clean", None): "a b c d", ("bg1", 0): "a b c d" if i < 4 else "a b c"})
            for i in range(12)]
    ws = make_ws(tmp_path, asr=spec)
    s = load_scores(ws)["asr"]
    s["bg_active"] = np.where(s["bg_id"] == "clean", "", np.where(s["item_id"].isin([f"u{i}" for i in range(4)]),
                                                                 "False", "True"))
    counts = cond.inactive_background_rows({"asr": s})
    assert counts.to_dict("records") == [{"task": "asr", "bg_id": "bg1", "n_noisy": 12, "n_inactive": 4,
                                          "inactive_share": 4 / 12}]
    out = cond.write_active_only_tables(ws, scores={"asr": s}, n_resamples=50)
    t = pd.read_csv(out["asr"])
    r = t[(t["scope"] == "condition") & (t["bg_id"] == "bg1")].iloc[0]
    assert r["n_items"] == 8 and r["mean_wer_pp"] == pytest.approx(25.0)   # 1 of 4 words, 8 items
    full = _row(cond.condition_table(s, "asr", n_resamples=50), bg="bg1", snr=0)
    assert full.n_items == 12 and full.mean_wer_pp == pytest.approx(25.0 * 8 / 12)
