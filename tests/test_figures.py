"""Tests of aiplib.analysis.paper (the tables behind the figures) on a synthetic workspace (20 backgrounds, 2 models, 4 tasks)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from authors_schema import inference_line, write_manifest
from paper_tables import write_tables

from aiplib.analysis import paper, stats
from aiplib.analysis.findings import FINDINGS_COLUMNS, findings, findings_lines, findings_markdown
from aiplib.core.errors import AiplibError
from aiplib.core.tasks import KEYWORDS
from aiplib.core.workspace import workspace
from aiplib.io import formats
from aiplib.scoring.score import score_inference

N_BG = 20
MODELS = ("tiny_en", "qwen2-audio-7b")
SNRS = (10, 5, 0)
SENTENCES = ["the quick brown fox jumps over the lazy dog",
             "please call stella and ask her to bring these things",
             "she sells sea shells by the sea shore today",
             "a large number of people gathered in the old square",
             "turn left at the second light and then go straight",
             "my phone number is easy to remember for everyone"]
ACCENTS = ["en-us", "en-gb", "en-us", "en-gb", "en-029", "en-029"]
KWS_ITEMS = [("k0", "yes"), ("k1", "stop"), ("k2", "left"), ("k3", "go"), ("k4", "bed"),
             ("k5", "tree")]


def _sid(fam, item, bg, snr):
    return f"{fam}__{item}__{bg}__" + ("clean" if snr is None else f"snr{snr:+03d}")


def _conditions(bgs):
    return [("clean", None)] + [(bg, snr) for bg in bgs for snr in SNRS]


def make_fake_workspace(root, *, tasks=("asr", "kws", "asr_steer_p5", "kws_steer_p5")):
    """Manifests, descriptors, battery and inference files whose degradation follows ``zcr``."""
    ws = workspace("demo", data_root=root)
    rng = np.random.default_rng(0)
    bgs = [f"bg{i:02d}" for i in range(N_BG)]
    severity = dict(zip(bgs, np.linspace(0.05, 0.9, N_BG)))
    cats = ["stationary", "transient", "music", "speech-like"]
    pd.DataFrame({"bg_id": bgs, "category": [cats[i % 4] for i in range(N_BG)],
                  "description": [f"background {b}" for b in bgs]}
                 ).to_csv(ws.descriptors / "battery.csv", index=False)
    desc = {"bg_id": bgs}
    for d in formats.DESCRIPTORS:
        desc[d] = rng.normal(size=N_BG)
    desc["zcr"] = np.array([severity[b] for b in bgs]) + rng.normal(scale=0.05, size=N_BG)
    desc["spectral_flatness"] = -desc["zcr"] + rng.normal(scale=0.2, size=N_BG)
    pd.DataFrame(desc).to_csv(ws.descriptors / "acoustic_descriptors.csv", index=False)

    asr_m, kws_m = [], []
    for i, (ref, acc) in enumerate(zip(SENTENCES, ACCENTS)):
        for bg, snr in _conditions(bgs):
            asr_m.append({"item_id": f"a{i}", "bg_id": bg, "snr_db": "" if snr is None else snr,
                          "reference": ref, "is_target": "", "accent_group": acc})
    for item, lab in KWS_ITEMS:
        for bg, snr in _conditions(bgs):
            kws_m.append({"item_id": item, "bg_id": bg, "snr_db": "" if snr is None else snr,
                          "reference": lab, "is_target": lab in KEYWORDS, "accent_group": ""})
    asr_m = write_manifest(ws, "asr", asr_m).to_dict("records")
    kws_m = write_manifest(ws, "kws", kws_m).to_dict("records")

    for mi, model in enumerate(MODELS):
        for task in tasks:
            fam = task.split("_")[0]
            damp = 0.5 if "steer" in task else 1.0
            lines = []
            for row in (asr_m if fam == "asr" else kws_m):
                bg, snr = row["background_id"], row["snr_db"]
                p = 0.0 if bg == "clean" else damp * severity[bg] * (1 + (10 - snr) / 10) / 2
                p = min(p * (1 + 0.5 * mi), 0.95)
                if fam == "asr":
                    words = row["transcript"].split()
                    keep = [w for w in words if rng.random() >= p]
                    resp = " ".join(keep).capitalize() + "."
                else:
                    lab = row["keyword"]
                    ok = rng.random() >= p
                    resp = (f"**{lab.capitalize()}**" if lab in KEYWORDS else "unknown") if ok \
                        else ("no" if lab != "no" else "yes")
                lines.append(inference_line(row, model=model, task=task, response=resp, prompt_id="p",
                                            decode_s=0.1, audio_s=2.0))
            lines[5] = inference_line(lines[5], model=model, task=task, response="__ERROR__", error="timeout",
                                      prompt_id="p")
            d = ws.inference / model
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{task}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return ws


@pytest.fixture(scope="module")
def fake_ws(tmp_path_factory):
    ws = make_fake_workspace(tmp_path_factory.mktemp("figs"))
    score_inference(ws)
    return ws


@pytest.mark.slow
def test_write_tables_writes_every_table(fake_ws):
    written = write_tables(fake_ws, n_resamples=200, seed=0)
    expected = {f"{n}.csv" for n in paper.TABLE_NAMES}   # the figures are drawn in notebook 09
    assert set(written) == expected and len(written) == 6
    for name, p in written.items():
        assert p.exists() and p.stat().st_size > (300 if name == "table4_accent_dwer.csv" else 500), name
        assert p.parent == fake_ws.results / "tables"

    t2 = pd.read_csv(written["table2_descriptor_correlations.csv"])
    assert t2.shape == (2 * (len(MODELS) + 1) * len(formats.DESCRIPTORS), 19)
    assert (t2["p_method"] == "permutation").all() and (t2["n_permutations"] == 9999).all()
    assert (t2["ci_usable"] >= 0.95 * 200).all()
    assert set(t2["model"]) == {"pooled", *MODELS} and set(t2["task"]) == {"asr", "kws"}
    for col in ("r_s", "p", "p_permutation", "ci_low", "ci_high", "p_bh", "seed", "n_resamples"):
        assert col in t2.columns
    z = t2[(t2.task == "asr") & (t2.model == "pooled") & (t2.descriptor == "zcr")].iloc[0]
    assert z.r_s > 0.8 and z.ci_low <= z.r_s <= z.ci_high and z.p_bh < 0.05
    assert (t2["n"] == N_BG).all()
    scores, desc, battery = paper.load_inputs(fake_ws)               # Figure 2's points
    pts = paper.descriptor_points(scores, desc, t2, battery=battery)
    assert list(dict.fromkeys(pts["descriptor"])) == paper.top_descriptors(t2, 3) and len(pts) == 2 * 3 * N_BG
    assert set(pts["category"]) == {"stationary", "transient", "music", "speech-like"}

    t3 = pd.read_csv(written["table3_descriptor_values.csv"])
    assert len(t3) == N_BG and sorted(t3["rank"]) == list(range(1, N_BG + 1))
    assert t3["mean_degradation_pp"].is_monotonic_increasing  # the authors' order: least harmful first
    assert t3.columns[:4].tolist() == ["rank", "bg_id", "category", "mean_degradation_pp"]
    assert all(d in t3.columns for d in formats.DESCRIPTORS)

    t4 = pd.read_csv(written["table4_accent_dwer_item_means.csv"])
    assert set(t4["accent_group"]) == {"en-us", "en-gb", "en-029"}
    assert len(t4) == 3 * len(MODELS) and set(t4["model"]) == set(MODELS)   # no pooled row
    # two items per group: no interval (a 2-item "interval" is only their range)
    assert t4["ci_low_pp"].isna().all() and (t4["ci_usable"] == 0).all()
    assert t4["note"].str.contains("no interval").all()
    t4a = pd.read_csv(written["table4_accent_dwer.csv"])                # the README's name: theirs
    assert set(t4a["accent_label"]) == {"en-us", "en-gb", "en-029"}      # not in their table: as is
    assert "mean_delta_wer_pp" in t4a.columns and "item_mean_delta_wer_pp" in t4.columns
    t4s = pd.read_csv(written["table4_accent_dwer_item_means_pooled_unspecified.csv"])
    assert set(t4s["model"]) == {"pooled"} and len(t4s) == 3

    t5 = pd.read_csv(written["table5_prompt_steering_rer.csv"])
    assert len(t5) == 2 * len(MODELS) and set(t5["family"]) == {"asr", "kws"}
    # the fake steering prompt halves the error probability: RER well below 1
    assert (t5.loc[t5.family == "asr", "rer"] < 0.8).all()


def test_table_values_match_stats(fake_ws):
    scores = formats.load_scores(fake_ws)
    assert scores["asr"]["item_id"].str.startswith("a").all()
    deg = stats.degradation_by_background(scores["asr"], "asr")
    rank = paper.background_ranking(scores, n_resamples=100)
    np.testing.assert_allclose(rank.loc[deg.index, "asr_delta_wer_pp"], deg["pooled"] * 100)
    curves = paper.snr_curves(scores, n_resamples=100)
    assert list(dict.fromkeys(curves["condition"])) == ["clean", "10 dB", "5 dB", "0 dB"]
    c = curves[(curves.family == "asr") & (curves.condition == "clean")]
    assert (c["value_pp"] == 0).all()            # clean hypotheses equal the reference


def test_figure7_leaves_out_qwen_in_panel_b(fake_ws):
    scores = formats.load_scores(fake_ws)
    c = paper.snr_curves(scores, n_resamples=50)
    drawn = c[c["in_figure"]]                                  # the lines of Figure 7's panels
    assert set(drawn.loc[drawn.family == "asr", "model"]) == set(MODELS)
    assert set(drawn.loc[drawn.family == "kws", "model"]) == {"tiny_en"}


def _notebook_09_text(nb_path) -> str:
    """Every Markdown and stream output of an executed notebook, joined."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/markdown", ""))
    return "\n".join(parts)


@pytest.mark.slow
def test_notebook_09_skips_steering_and_accent_views_with_a_note(tmp_path):
    """Notebook 09 on a run without steering tasks and without accent groups: Table 5, Figure 6,
    Table 4 and Figure 5 are not made, and the notebook says so where they would be."""
    from notebook_run import run_notebook

    ws = make_fake_workspace(tmp_path / "data", tasks=("asr", "kws"))
    man = pd.read_csv(ws.manifests / "asr.csv")
    man["accent_group"] = ""
    man["accent"] = ""
    man.to_csv(ws.manifests / "asr.csv", index=False)
    score_inference(ws)
    out = run_notebook("09_make_figures", tmp_path / "09_make_figures.ipynb",
                       parameters={"profile": ws.profile, "n_resamples": 20, "seed": 0},
                       env={"AIP_DATA_ROOT": str(ws.root.parent), "AIP_PROFILE": ws.profile})
    text = _notebook_09_text(out)
    for note in ("_No steering scores: Table 5 not made._", "_No steering scores: Figure 6 not made._",
                 "_No accents: Table 4 not made._", "_No ASR item has an accent group: Figure 5 not made._"):
        assert note in text
    made = {p.name for p in ws.tables_dir.iterdir()} | {p.name for p in ws.figures_dir.iterdir()}
    for name in ("table5_prompt_steering_rer.csv", "figure6_prompt_steering_rer.png",
                 "table4_accent_dwer.csv", "table4_accent_dwer_item_means.csv",
                 "figure5_accent_degradation.png"):
        assert name not in made
    assert {"table3_descriptor_values.csv", "figure4_background_ranking.png"} <= made  # the rest is made


def test_needs_asr_and_kws(tmp_path):
    ws = make_fake_workspace(tmp_path, tasks=("asr",))
    score_inference(ws)
    with pytest.raises(AiplibError, match="kws"):
        write_tables(ws)


# ------------------------------------------------------------------ the authors' definitions
def _toy_scores():
    """Two backgrounds, two items, two models: hand-computable degradations."""
    rows = []
    for m in ("m1", "m2"):
        for item in ("i1", "i2"):
            rows.append(dict(model=m, task="asr", stimulus_id=f"{m}{item}c", item_id=item,
                             bg_id="clean", snr_db=np.nan, wer=0.0, errors=0, ref_words=4,
                             delta_wer=np.nan, accent_group="g"))
            rows += [dict(model=m, task="asr", stimulus_id=f"{m}{item}{bg}", item_id=item,
                          bg_id=bg, snr_db=0.0, wer=w, errors=4 * w, ref_words=4, delta_wer=w,
                          accent_group="g")
                     for bg, w in (("A", 0.5), ("B", 0.1 if item == "i1" else 2.0))]
    asr = pd.DataFrame(rows)
    kws = []
    for m in ("m1", "m2"):
        for item in ("k1", "k2"):
            kws.append(dict(model=m, task="kws", stimulus_id=f"{m}{item}c", item_id=item,
                            bg_id="clean", snr_db=np.nan, correct=1.0, delta_acc=np.nan))
            kws += [dict(model=m, task="kws", stimulus_id=f"{m}{item}{bg}", item_id=item,
                         bg_id=bg, snr_db=0.0, correct=1.0 - d, delta_acc=d)
                    for bg, d in (("A", 1.0), ("B", 0.0))]
    return {"asr": asr, "kws": pd.DataFrame(kws)}


def test_figure4_ranks_by_mean_of_asr_and_kws():
    # A: ASR 50 pp, KWS 100 pp → mean 75; B: ASR mean(10, 200) = 105 pp, KWS 0 → 52.5.
    # Mean of ranks would tie (1.5 each) and put B first on ASR; the authors' mean puts A first.
    r = paper.background_ranking(_toy_scores(), n_resamples=50)
    assert list(r.index) == ["A", "B"] and list(r["rank"]) == [1, 2]
    assert r.loc["A", "mean_degradation_pp"] == pytest.approx(75.0)
    assert r.loc["B", "mean_degradation_pp"] == pytest.approx(52.5)
    assert r["asr_ci_low_pp"].isna().all() and (r["asr_ci_usable"] == 0).all()   # 2 items


def test_figure4_pooling_leaves_out_a_background_one_model_lacks():
    s = _toy_scores()
    s["asr"] = s["asr"][~((s["asr"].model == "m2") & (s["asr"].bg_id == "B"))]
    r = paper.background_ranking(s, n_resamples=50)
    # the authors' flat mean pools the rows there are (m1's 0.1 and 2.0); ours is not pooled
    assert r.loc["B", "asr_delta_wer_pp"] == pytest.approx(105.0)
    assert np.isnan(r.loc["B", "asr_delta_wer_snr_balanced_pp"]) and list(r.index) == ["A", "B"]
    assert "no rows of models m2" in r.loc["B", "note"]


def test_figure7_is_mean_per_utterance_wer_with_corpus_beside():
    c = paper.snr_curves(_toy_scores(), n_resamples=50)
    a = c[(c.family == "asr") & (c.model == "m1") & (c.condition == "0 dB")].iloc[0]
    # per-utterance WERs 0.5, 0.5, 0.1, 2.0 → mean 77.5 %; corpus (2+2+0.4+8)/16 = 77.5 % too,
    # so use unequal lengths to tell them apart
    assert a.value_pp == pytest.approx(77.5)
    s = _toy_scores()
    s["asr"].loc[s["asr"].item_id == "i2", "ref_words"] = 8
    s["asr"].loc[s["asr"].item_id == "i2", "errors"] *= 2
    a = paper.snr_curves(s, n_resamples=50).query("family == 'asr' and model == 'm1' and "
                                                   "condition == '0 dB'").iloc[0]
    assert a.value_pp == pytest.approx(77.5)                         # mean of utterance WERs
    assert a.corpus_wer_pp == pytest.approx(100 * (2 + 0.4 + 4 + 16) / (4 + 4 + 8 + 8))


def test_table5_rer_paper_definition_and_flag():
    s = _toy_scores()
    base = s["kws"]
    steer = base.assign(task="kws_steer_p5")
    steer.loc[steer.bg_id == "A", "delta_acc"] = 0.5
    asr_steer = s["asr"].assign(task="asr_steer_p5", delta_wer=s["asr"]["delta_wer"] * 0.5)
    asr_base = s["asr"].copy()
    asr_base["delta_wer"] = asr_base["delta_wer"] * 0 - 0.02 * asr_base["delta_wer"].notna()
    t = paper.table5_prompt_steering_rer({"asr": asr_base, "kws": base, "asr_steer_p5": asr_steer,
                                            "kws_steer_p5": steer}, n_resamples=50)
    k = t[(t.family == "kws") & (t.model == "m1")].iloc[0]
    # paired (ours, on delta_acc): Δ_base = mean(1, 0) = 0.5, Δ_steer = mean(0.5, 0) = 0.25
    assert k.rer_paired == pytest.approx(0.5) and k.base_flag == "" and k.rule == "ratio"
    # the authors' (on `correct`, unchanged here): 1 − 0.5 in both tasks
    assert k.rer == pytest.approx(1.0) and k.delta_base_pp == pytest.approx(50.0)
    a = t[(t.family == "asr") & (t.model == "m1")].iloc[0]
    assert a.delta_base_pp == pytest.approx(-2.0) and a.base_flag == "baseline <= 0"
    assert a.rer == pytest.approx(a.delta_steer_pp / 100 / (-0.02 + 1e-9))
    assert np.isnan(a.ci_low)                                        # 2 items: no interval
    # Figure 6 (notebook 09) draws no bar where base_flag is set, and marks it "flagged"
    assert t.loc[(t.family == "asr") & (t.model == "m1"), "base_flag"].ne("").all()


def test_table5_rer_the_authors_unpaired_way_and_ours_paired_beside():
    s = _toy_scores()
    kb = s["kws"]
    ks = kb.assign(task="kws_steer_p5")
    # the steering run failed on k2 at background A (no row), otherwise the same answers
    ks = ks[~((ks.item_id == "k2") & (ks.bg_id == "A"))]
    ab = s["asr"]
    as_ = ab.assign(task="asr_steer_p5", delta_wer=ab["delta_wer"] * 0.5)
    as_ = as_[~((as_.item_id == "i2") & (as_.bg_id == "B"))]         # one steering row missing
    t = paper.table5_prompt_steering_rer({"asr": ab, "kws": kb, "asr_steer_p5": as_,
                                            "kws_steer_p5": ks}, n_resamples=50)
    k = t[(t.family == "kws") & (t.model == "m1")].iloc[0]
    # authors, by hand: base acc clean 1, noisy (0 + 1 + 0 + 1) / 4 → Δ 0.5; steer clean 1,
    # noisy (0 + 1 + 1) / 3 → Δ 1/3; RER = (1/3) / 0.5
    assert k.delta_base_pp == pytest.approx(50.0) and k.delta_steer_pp == pytest.approx(100 / 3)
    assert k.rer == pytest.approx(2 / 3) and (k.n_base_rows, k.n_steer_rows) == (6, 5)
    # paired: the 3 noisy stimuli both tasks have, Δ 1/3 in both → 1
    assert k.n_pairs == 3 and k.rer_paired == pytest.approx(1.0)
    a = t[(t.family == "asr") & (t.model == "m1")].iloc[0]
    # authors: base mean(0.5, 0.1, 0.5, 2.0) = 0.775; steer mean(0.25, 0.05, 0.25) = 0.55 / 3
    assert a.rer == pytest.approx((0.55 / 3) / 0.775)
    # paired on the 3 common rows: base (0.5 + 0.1 + 0.5) / 3, steer half of it
    assert a.rer_paired == pytest.approx(0.5)
    assert list(t.columns) == paper.TABLE5_COLUMNS


def test_top_descriptors_largest_mean_abs_rs():
    t2 = pd.DataFrame({"task": ["asr", "kws"] * 4, "model": "pooled",
                       "descriptor": ["a", "a", "b", "b", "c", "c", "d", "d"],
                       "r_s": [0.9, -0.1, -0.6, -0.6, 0.2, 0.3, np.nan, 0.99]})
    # mean |r_s|: a 0.5, b 0.6, c 0.25, d NaN (not computable in ASR)
    assert paper.top_descriptors(t2, 3) == ["b", "a", "c"]


def test_descriptors_rounded_before_spearman_as_the_authors():
    from scipy.stats import spearmanr
    from scipy.stats import t as scipy_t

    bgs = [f"bg{i}" for i in range(6)]
    deg = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    rows = [dict(model="m1", task=t, item_id="i", bg_id=b, snr_db=0.0, **{c: d})
            for t, c in (("asr", "delta_wer"), ("kws", "delta_acc")) for b, d in zip(bgs, deg)]
    scores = {"asr": pd.DataFrame(rows[:6]), "kws": pd.DataFrame(rows[6:])}
    desc = pd.DataFrame({c: np.linspace(1, 2, 6) for c in formats.DESCRIPTORS},
                        index=pd.Index(bgs, name="bg_id"))
    # ZCR differs only in the 5th decimal among the first three: the authors' round(·, 4) ties them
    desc["zcr"] = [0.10004, 0.10001, 0.10003, 0.2, 0.3, 0.4]
    t2 = paper.table2_descriptor_correlations(scores, desc, n_resamples=20)
    z = t2[(t2.task == "asr") & (t2.model == "pooled") & (t2.descriptor == "zcr")].iloc[0]
    assert z.r_s == pytest.approx(spearmanr([0.1, 0.1, 0.1, 0.2, 0.3, 0.4], deg).statistic)
    assert z.r_s_unrounded == pytest.approx(spearmanr(desc["zcr"], deg).statistic)
    # unrounded: ranks (3, 1, 2, 4, 5, 6), Σd² = 6 → 1 − 36/210; rounded: tied ranks (2, 2, 2, …)
    assert z.r_s_unrounded == pytest.approx(1 - 6 * 6 / 210)
    assert z.r_s == pytest.approx(0.941124, abs=1e-6) and z.r_s > z.r_s_unrounded + 0.1
    # the authors' p beside ours: scipy's t approximation, t = r √(4 / (1 − r²)) on 4 df
    t = z.r_s * np.sqrt(4 / (1 - z.r_s ** 2))
    assert z.p == pytest.approx(2 * scipy_t.sf(t, 4)) and z.p == pytest.approx(0.005098, abs=1e-6)   # theirs
    assert z.p_method != "t_approx" and z.p_permutation != pytest.approx(z.p)                           # ours
    # spectral centroid to 2 decimals: 1000.004 and 1000.001 tie as well
    assert stats.round_descriptors(pd.DataFrame({"spectral_centroid": [1000.004, 1000.006],
                                                 "vad_speech_fraction": [0.123456, 0.5]})
                                   ).to_numpy().tolist() == [[1000.0, 0.1235], [1000.01, 0.5]]  # VAD: 4 decimals


def test_top_three_ranked_on_mean_abs_rs_rounded_to_3_decimals():
    # a: mean |r_s| 0.80020, b: 0.80004 → both 0.800 → table order (b first), unrounded a first
    t2 = pd.DataFrame({"task": ["asr", "kws"] * 4, "model": "pooled",
                       "descriptor": ["b", "b", "a", "a", "c", "c", "d", "d"],
                       "r_s": [0.80008, -0.8, 0.8004, 0.8, 0.5, 0.5, 0.1, 0.1]})
    assert paper.top_descriptors(t2, 2) == ["b", "a"]
    m = t2.assign(a=t2.r_s.abs()).groupby("descriptor")["a"].mean().sort_values(ascending=False)
    assert list(m.index[:2]) == ["a", "b"]          # what the unrounded ranking would pick


def test_top_three_rounding_is_numpys_as_the_authors_float64():
    # a (first in table order): mean |r_s| 0.3015 → numpy 0.302 (the authors' round of an
    # np.float64), Python's round 0.301; b: 0.3020 → 0.302 both: a tie, so a stays first
    t2 = pd.DataFrame({"task": ["asr", "kws"] * 3, "model": "pooled", "descriptor": ["a", "a", "b", "b", "c", "c"],
                       "r_s": [0.3015, -0.3015, 0.302, 0.302, 0.1, 0.1]})
    assert round(np.mean([0.3015, 0.3015]), 3) == 0.302 and round(0.3015, 3) == 0.301
    assert paper.top_descriptors(t2, 2) == ["a", "b"]
    assert stats.rank_by_mean_abs_rs(t2.r_s[::2].set_axis(list("abc")), t2.r_s[1::2].set_axis(list("abc"))
                                     ).to_dict() == {"a": 0.302, "b": 0.302, "c": 0.1}


def test_table4_the_authors_accent_labels_beside_our_groups():
    rows = []
    for item, accent, group, d in (("ls1", "american_english", None, (0.1, 0.3)),
                                   ("ls2", "american_english", None, (0.2, None)),
                                   ("cv1", "United States English", "US English", (0.0, 0.4)),
                                   ("cv2", "United States English,England English", None, (0.5, 0.5)),
                                   ("cv3", "India and South Asia (India, Pakistan, Sri Lanka)",
                                    "India & S. Asia", (0.2, 0.2))):
        rows.append(dict(model="m1", task="asr", item_id=item, bg_id="clean", snr_db=np.nan,
                         delta_wer=np.nan, accent=accent, accent_group=group, errors=0, ref_words=4))
        rows += [dict(model="m1", task="asr", item_id=item, bg_id=bg, snr_db=5.0, delta_wer=v,
                      accent=accent, accent_group=group, errors=0, ref_words=4)
                 for bg, v in zip(("A", "B"), d) if v is not None]
    scores = {"asr": pd.DataFrame(rows)}
    t = paper.table4_accent_dwer_authors(scores).set_index("accent_label")
    # their label table; an unmapped string kept as it is; flat mean over rows (0.1, 0.3, 0.2)
    assert set(t.index) == {"US English (anon)", "US English", "India & S. Asia",
                            "United States English,England English"}
    assert t.loc["US English (anon)", "mean_delta_wer_pp"] == pytest.approx(20.0)
    assert (t.loc["US English (anon)", "n_items"], t.loc["US English (anon)", "n_rows"]) == (2, 3)
    assert t.loc["United States English,England English", "mean_delta_wer_pp"] == pytest.approx(50.0)
    # ours beside: only the mapped groups (the others are "unspecified", kept out of Table 4)
    ours, rest = paper.table4_accent_dwer(scores, n_resamples=20)
    assert set(ours["accent_group"]) == {"US English", "India & S. Asia"}
    assert paper.authors_accent_label("american_english") == "US English (anon)"
    assert paper.authors_accent_label("Hong Kong English") == "Hong Kong English"
    # Figure 5 (notebook 09) has two panels: the authors' labels and our groups
    assert not paper.table4_accent_dwer_authors(scores).empty and not ours.empty


def test_figure5_bars_give_n_and_an_interval_only_from_the_threshold(fake_ws):
    scores = formats.load_scores(fake_ws)
    t4, _ = paper.table4_accent_dwer(scores, n_resamples=50)
    t4a = paper.table4_accent_dwer_authors(scores)
    bars = paper.accent_bars(t4, t4a)
    assert set(bars["panel"]) == {"authors", "ours"} and len(bars) == len(t4) + len(t4a)
    ours = bars[bars["panel"] == "ours"]
    assert ours["n_items"].tolist() == t4["n_items"].tolist() == [2] * len(t4)     # n per bar
    assert bars["ci_low_pp"].isna().all() and bars["ci_high_pp"].isna().all()      # 2 items: no interval
    # an interval is kept from MIN_N_FOR_INTERVAL items on, dropped below it even when a table gives one
    k = stats.MIN_N_FOR_INTERVAL
    given = t4.assign(n_items=[k, k - 1] * (len(t4) // 2) + [k] * (len(t4) % 2), ci_low_pp=1.0, ci_high_pp=3.0)
    b = paper.accent_bars(given)
    has = b["ci_low_pp"].notna()
    assert has.any() and (b.loc[has, "n_items"] >= k).all() and (b.loc[~has, "n_items"] < k).all()
    assert (b["ci_low_pp"].notna() == b["ci_high_pp"].notna()).all()


@pytest.mark.slow
def test_findings_numbers_equal_the_tables_they_cite(fake_ws):
    from aiplib.analysis import conditions as cond

    scores, desc, _ = paper.load_inputs(fake_ws)
    cond.write_condition_tables(fake_ws, n_resamples=50, seed=0)
    tables = cond.read_condition_tables(fake_ws.results)
    ranking = paper.background_ranking(scores, n_resamples=50)
    t2 = paper.table2_descriptor_correlations(scores, desc, n_resamples=50)
    t4, _ = paper.table4_accent_dwer(scores, n_resamples=50)
    t5 = paper.table5_prompt_steering_rer(scores, n_resamples=50)
    f = findings(tables, ranking, table2=t2, table4=t4, table5=t5)
    assert list(f.columns) == FINDINGS_COLUMNS
    assert set(f["finding"]) == {"overall", "snr", "most_harmful", "least_harmful", "descriptor", "accent_high",
                                 "accent_low", "steering"}
    for r in f.itertuples():
        if r.finding in ("overall", "snr"):
            t = tables[r.task]
            t = t[(t["scope"] == r.finding) & (t["model"] == r.model)]
            src = t[t["snr_db"] == r.subject] if r.finding == "snr" else t
            got, want = (r.value, r.ci_low, r.ci_high, r.n, r.p), src[
                ["delta_pp", "ci_low_pp", "ci_high_pp", "n_items", "p_value"]].iloc[0].tolist()
        elif r.finding.endswith("harmful"):
            fam = r.task
            col = "asr_delta_wer_pp" if fam == "asr" else "kws_delta_acc_pp"
            got, want = (r.value, r.ci_low, r.ci_high), ranking.loc[r.subject, [col, f"{fam}_ci_low_pp",
                                                                               f"{fam}_ci_high_pp"]].tolist()
        elif r.finding == "descriptor":
            src = t2[(t2["task"] == r.task) & (t2["model"] == "pooled")]
            assert abs(r.value) == src["r_s"].abs().max()                      # the strongest
            got, want = (r.value, r.ci_low, r.ci_high, r.n, r.p), src[src["descriptor"] == r.subject][
                ["r_s", "ci_low", "ci_high", "n", "p_bh"]].iloc[0].tolist()
        elif r.finding.startswith("accent"):
            src = t4[t4["model"] == r.model]
            assert r.value == (src["item_mean_delta_wer_pp"].max() if r.finding == "accent_high"
                               else src["item_mean_delta_wer_pp"].min())
            got, want = (r.value, r.n), src[src["accent_group"] == r.subject][
                ["item_mean_delta_wer_pp", "n_items"]].iloc[0].tolist()
        else:
            src = t5[(t5["model"] == r.model) & (t5["steer_task"] == r.task)]
            got, want = (r.value, r.ci_low, r.ci_high, r.n), src[["rer", "ci_low", "ci_high", "n_items"]].iloc[0].tolist()
        np.testing.assert_equal(np.array(got, float), np.array(want, float), err_msg=f"{r.finding} {r.task} {r.model}")
    most = f[f["finding"] == "most_harmful"]["subject"].unique()
    least = f[f["finding"] == "least_harmful"]["subject"].unique()
    assert list(most) == [ranking.index[0]] and list(least) == [ranking.index[-1]]
    assert (f.loc[f["finding"] == "overall", "value"] > 0).all()                # noise hurts in the fake run


def _sentence(lines, head):
    """The one Findings line that starts with ``**<head>.**``."""
    found = [line for line in lines if line.startswith(f"**{head}.**")]
    assert len(found) == 1, (head, lines)
    return found[0]


def _pp(v, lo, hi, nd=1, unit=" pp"):
    """A value with its interval as the Findings write it (no interval when a bound is missing)."""
    text = f"{v:+.{nd}f}{unit}"
    if np.isfinite(lo) and np.isfinite(hi):
        text += f" [{lo:+.{nd}f}, {hi:+.{nd}f}]"
    return text


@pytest.mark.slow
def test_findings_sentences_cite_the_numbers_of_the_csv_they_name(fake_ws):
    """Each Findings sentence, built by aiplib from the tables, holds the numbers of the CSV its
    link names, read back here from results/tables/ (not from the findings table)."""
    from aiplib.analysis import conditions as cond

    scores, desc, _ = paper.load_inputs(fake_ws)
    cond.write_condition_tables(fake_ws, n_resamples=50, seed=0)
    tabs = fake_ws.tables_dir
    ranking = paper.background_ranking(scores, n_resamples=50)
    made = {"table2_descriptor_correlations": paper.table2_descriptor_correlations(scores, desc, n_resamples=50),
            "table4_accent_dwer_item_means": paper.table4_accent_dwer(scores, n_resamples=50)[0],
            "table5_prompt_steering_rer": paper.table5_prompt_steering_rer(scores, n_resamples=50)}
    for name, t in made.items():
        t.to_csv(tabs / f"{name}.csv", index=False)
    tables = cond.read_condition_tables(fake_ws.results)
    failures = pd.DataFrame([{"model": MODELS[0], "task": "asr", "n_left_out": 3, "n_stimuli": 366}])
    found = findings(tables, ranking, **{k: made[n] for k, n in (
        ("table2", "table2_descriptor_correlations"), ("table4", "table4_accent_dwer_item_means"),
        ("table5", "table5_prompt_steering_rer"))})
    lines = findings_lines(found, tables=tables, ranking=ranking, n_resamples=50,
                           table2=made["table2_descriptor_correlations"],
                           table4=made["table4_accent_dwer_item_means"], failures=failures)
    csv = {name: pd.read_csv(tabs / f"{name}.csv") for name in made}
    levels = {"asr": ("ASR WER", "wer_pp"), "kws": ("KWS accuracy", "acc_pp")}
    # Overall and SNR of several models: a sentence, then a compact table each (conditions_<task>.csv)
    overall = _sentence(lines, "Overall")
    snr = _sentence(lines, "SNR")
    assert "50 resamples" in overall and "(#table-r1)" in overall and "the table below" in overall
    over_table = lines[lines.index(overall) + 1]
    snr_table = lines[lines.index(snr) + 1]
    assert over_table.startswith("| model | measure | clean % | noisy % |") and snr_table.startswith("| model |")
    assert len(over_table.splitlines()) == 2 + 2 * len(MODELS)          # header, rule, model × task
    for task in ("asr", "kws"):
        c = pd.read_csv(tabs / f"conditions_{task}.csv")
        name, level = levels[task]
        for model in MODELS:
            o = c[(c["scope"] == "overall") & (c["model"] == model)].iloc[0]
            cl = c[(c["scope"] == "clean") & (c["model"] == model)].iloc[0]
            assert (f"| `{model}` | {name} | {cl[level]:.1f} | {o[level]:.1f} | "
                    f"{_pp(o.delta_pp, o.ci_low_pp, o.ci_high_pp, unit='')} | {int(o.n_items)} |") in over_table
            by_snr = c[(c["scope"] == "snr") & (c["model"] == model)].sort_values("snr_db", ascending=False)
            cells = " | ".join(f"{r[level]:.1f} · {_pp(r.delta_pp, r.ci_low_pp, r.ci_high_pp, unit='')}"
                               for _, r in by_snr.iterrows())
            assert f"| `{model}` | {name} | {cl[level]:.1f} | {cells} |" in snr_table
    md = findings_markdown(lines)
    assert "\n\n| model | measure | clean % | noisy % |" in md and md.startswith("- **Overall.**")
    # one model: the absolute levels stand beside the change in the sentences themselves
    one = {t: v[v["model"] == MODELS[0]] for t, v in tables.items()}
    one_lines = findings_lines(findings(one, ranking), tables=one, ranking=ranking, n_resamples=50)
    assert not any(line.startswith("|") for line in one_lines)
    c = pd.read_csv(tabs / "conditions_asr.csv")
    c = c[c["model"] == MODELS[0]]
    o = c[c["scope"] == "overall"].iloc[0]
    cl = c[c["scope"] == "clean"].iloc[0]
    assert (f"ASR: WER {cl.wer_pp:.1f} % clean, {o.wer_pp:.1f} % noisy, mean per-item ΔWER "
            f"{_pp(o.delta_pp, o.ci_low_pp, o.ci_high_pp)} ({int(o.n_items)} items") in _sentence(one_lines, "Overall")
    low = c[c["scope"] == "snr"].sort_values("snr_db").iloc[0]
    assert (f"{_pp(low.delta_pp, low.ci_low_pp, low.ci_high_pp)} at {low.snr_db:g} dB (WER {low.wer_pp:.1f} %)"
            in _sentence(one_lines, "SNR"))
    # Backgrounds: Figure 4's ranking, most harmful first
    bgs = _sentence(lines, "Backgrounds")
    first = ranking.iloc[0]
    last = ranking.iloc[-1]
    assert f"Of the {N_BG} backgrounds" in bgs
    assert (f"`{ranking.index[0]}` (ASR ΔWER "
            f"{_pp(first.asr_delta_wer_pp, first.asr_ci_low_pp, first.asr_ci_high_pp)}") in bgs
    assert bgs.index(f"`{ranking.index[0]}`") < bgs.index("hurt most") < bgs.index(f"`{ranking.index[-1]}`")
    assert f"KWS ΔAcc {_pp(last.kws_delta_acc_pp, last.kws_ci_low_pp, last.kws_ci_high_pp)}" in bgs
    # Descriptors: table2_descriptor_correlations.csv, the pooled row of the largest |r_s|
    dsc = _sentence(lines, "Descriptors")
    t2 = csv["table2_descriptor_correlations"]
    for task in ("asr", "kws"):
        pooled = t2[(t2["task"] == task) & (t2["model"] == "pooled")]
        r = pooled.loc[pooled["r_s"].abs().idxmax()]
        assert (f"{task.upper()} `{r.descriptor}`, r_s = {_pp(r.r_s, r.ci_low, r.ci_high, 3, '')} "
                f"({int(r.n)} backgrounds") in dsc
    assert "(#table-2)" in dsc
    # Accents: table4_accent_dwer_item_means.csv, per model the smallest to the largest group
    acc = _sentence(lines, "Accents")
    t4 = csv["table4_accent_dwer_item_means"]
    for model in MODELS:
        g = t4[t4["model"] == model]
        lo = g.loc[g["item_mean_delta_wer_pp"].idxmin()]
        hi = g.loc[g["item_mean_delta_wer_pp"].idxmax()]
        assert (f"{lo.item_mean_delta_wer_pp:+.1f} pp (`{lo.accent_group}`, {int(lo.n_items)} items, no interval) "
                f"to {hi.item_mean_delta_wer_pp:+.1f} pp (`{hi.accent_group}`, {int(hi.n_items)} items, "
                f"no interval) over {len(g)} groups for `{model}`") in acc
    # Steering: table5_prompt_steering_rer.csv
    steer = _sentence(lines, "Steering prompt")
    for r in csv["table5_prompt_steering_rer"].itertuples():
        ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else ""
        below = "below" if r.rer < 1 else "at or above"
        assert f"{r.family.upper()} RER for `{r.model}` {r.rer:.2f}{ci} ({below} 1" in steer
    # What is coarse: the condition rows of every table, the accent groups, the left-out stimuli
    coarse = _sentence(lines, "What is coarse")
    cnd = pd.concat([pd.read_csv(tabs / f"conditions_{t}.csv") for t in tables])
    cnd = cnd[cnd["scope"] == "condition"]
    assert f"{int(cnd['coarse'].sum())} of {len(cnd)} background × SNR conditions" in coarse
    assert f"{int(t4['ci_low_pp'].isna().sum())} of {len(t4)} accent groups have no interval" in coarse
    assert f"`{MODELS[0]}` × asr left out 3 of 366 stimuli" in coarse
    assert f"{len(SENTENCES)} ASR items, {len(KWS_ITEMS)} KWS items, {N_BG} backgrounds" in coarse
    assert "one model" not in coarse
