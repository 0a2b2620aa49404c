"""Condition families (issue 14, analysis side): scoring a family's rows, leakage and its floor,
the competing-speech and channel tables, the figure and the list of conditions, on synthetic
family workspaces whose values are known by construction."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aiplib.analysis import family_results as fr
from aiplib.core.workspace import workspace
from aiplib.scoring import families as fs
from aiplib.scoring import family_columns
from aiplib.scoring.score import score_inference

REF = "please enter your password"
SNRS = (-10, -5, 0, 5, 10)
COMPETING = {  # condition id -> (setting, languages, same voice, distractor text; its first word leaks)
    "talker_fr": ("single", "fr", False, "votre mot de passe merci"),
    "talker_es": ("single", "es", True, "favor su contrasena"),
    "cocktail_fr_it_ru": ("cocktail", "fr+it+ru", False, "grazie votre da"),
}
CHANNEL = {"telephone": {"transform": "telephone", "low_hz": 300.0, "high_hz": 3400.0},
           "clip_+30db": {"transform": "clip", "gain_db": 30.0}}
N_ITEMS = 12


class FamilyView:
    """The family view of a workspace as fam's ``Workspace.with_family`` lays it out."""

    def __init__(self, ws, family):
        self.ws, self.family, self.root = ws, family, ws.root

    def manifest_csv(self, fam):
        return self.root / "manifests" / self.family / f"{fam}.csv"

    def inference_jsonl(self, model, task):
        return self.root / "inference" / self.family / model / f"{task}.jsonl"

    def scores_csv(self, task):
        return self.root / "results" / "scores" / self.family / f"{task}.csv"

    def scores_sidecar(self, task):
        return self.scores_csv(task).with_suffix(".json")

    def item_bank_sidecar(self, fam):
        return self.ws.item_bank_sidecar(fam)

    def rel(self, p):
        return self.ws.rel(p)


class WithFamily:
    """A workspace with ``with_family`` (what fam's branch adds)."""

    def __init__(self, ws):
        self.ws, self.root = ws, ws.root

    def with_family(self, family):
        return FamilyView(self.ws, family)


def _write(view, task, man_rows, inf_rows, model="m1"):
    p = view.manifest_csv(task)
    p.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(man_rows).to_csv(p, index=False)
    q = view.inference_jsonl(model, task)
    q.parent.mkdir(parents=True, exist_ok=True)
    q.write_text("".join(json.dumps({**r, "model": model, "task": task, "prompt_id": "p0"}) + "\n"
                         for r in inf_rows), encoding="utf-8")


def _base(sid, item, bg, snr, cond, seed, cf):
    return {"id": sid, "speech_id": item, "background_id": bg, "snr_db": snr, "condition": cond, "seed": seed,
            "speech_path": f"{item}.wav", "bg_path": "", "condition_family": cf}


def _competing_rows(task):
    man, inf = [], []
    for k in range(N_ITEMS):
        item = f"{task}{k:02d}"
        spec = {"transcript": REF} if task == "asr" else {"keyword": "yes", "is_target": True}
        man.append({**_base(f"{item}_clean", item, "clean", 99, "clean", len(man), "competing_speech"), **spec})
        inf.append({"id": f"{item}_clean", "raw": REF if task == "asr" else "Yes."})
        for cid, (setting, langs, same, text) in COMPETING.items():
            leak = text.split()[0]
            for snr in SNRS:
                sid = f"{item}_{cid}_snr{snr}"
                man.append({**_base(sid, item, cid, snr, f"competing_{cid}", len(man), "competing_speech"), **spec,
                            "setting": setting, "distractor_languages": langs, "same_voice_as_target": same,
                            "distractor_ids": "|".join(f"{lang}_1" for lang in langs.split("+")),
                            "distractor_text": text, "looped": False,
                            "condition_params": json.dumps({"snr_db": snr, "languages": langs})})
                if task == "asr":   # even items: one leak word in 4 (WER 1/4); odd: "enter the password" (2/4)
                    hyp = REF if snr > 0 else (f"please enter {leak} password" if k % 2 == 0 else "enter the password")
                else:               # even items answer the distractor's first word at 0 dB and below
                    hyp = "yes" if snr > 0 or k % 2 else leak.capitalize() + "."
                inf.append({"id": sid, "raw": hyp})
    return man, inf


def _channel_rows(task):
    man, inf = [], []
    for k in range(N_ITEMS):
        item = f"{task}{k:02d}"
        spec = {"transcript": REF} if task == "asr" else {"keyword": "yes", "is_target": True}
        man.append({**_base(f"{item}_clean", item, "clean", 99, "clean", len(man), "channel"), **spec})
        inf.append({"id": f"{item}_clean", "raw": REF if task == "asr" else "yes"})
        for name, par in CHANNEL.items():
            sid = f"{item}_ch_{name}"
            man.append({**_base(sid, item, name, 99, f"channel_{name}", len(man), "channel"), **spec,
                        "channel_condition": name, "applied_to": "speech", "condition_params": json.dumps(par)})
            bad = name == "clip_+30db" and k % 2 == 0     # clipping: even items lose "password"
            inf.append({"id": sid, "raw": ("please enter your" if task == "asr" else "no") if bad else
                        (REF if task == "asr" else "yes")})
    return man, inf


@pytest.fixture(scope="module")
def fam_ws(tmp_path_factory):
    ws = workspace("demo", data_root=tmp_path_factory.mktemp("fam"))
    wf = WithFamily(ws)
    for family, make in (("competing_speech", _competing_rows), ("channel", _channel_rows)):
        view = wf.with_family(family)
        for task in ("asr", "kws"):
            _write(view, task, *make(task))
        score_inference(view)
    skipped = fr.family_path(wf, "channel", "manifests", "skipped.csv")
    pd.DataFrame({"condition": ["amr_nb_12k2"], "reason": ["no AMR-NB encoder in the local ffmpeg"]}).to_csv(
        skipped, index=False)
    return wf


# ------------------------------------------------------------------------------ scoring
def test_family_rows_scored_and_paired_within_the_family(fam_ws):
    comp = fr.read_family_scores(fam_ws, "competing_speech")
    asr = comp["asr"].set_index("stimulus_id")
    assert len(asr) == N_ITEMS * (1 + 3 * 5)
    r = asr.loc["asr00_talker_fr_snr-10"]                    # negative SNR in the id and the column
    assert (r["item_id"], r["bg_id"], r["snr_db"]) == ("asr00", "talker_fr", -10)
    assert r["wer"] == pytest.approx(0.25) and r["delta_wer"] == pytest.approx(0.25)
    assert asr.loc["asr01_talker_fr_snr-5", "delta_wer"] == pytest.approx(0.5)
    assert asr.loc["asr00_talker_fr_snr10", "delta_wer"] == 0
    assert np.isnan(asr.loc["asr00_clean", "delta_wer"]) and np.isnan(asr.loc["asr00_clean", "leak_share"])
    assert (asr["condition_family"] == "competing_speech").all()     # clean rows too
    # leakage: "please enter votre password": 1 of 4 words is the distractor's, and it is no insertion
    assert r["leak_share"] == 0.25 and r["n_leak_words"] == 1 and r["leak_words"] == "votre"
    assert r["n_leak_insertions"] == 0 and r["floor_leak_share"] == 0
    assert asr.loc["asr01_talker_fr_snr-5", "leak_share"] == 0
    side = json.loads(fam_ws.with_family("competing_speech").scores_sidecar("asr").read_text())
    assert side["condition_family"] == ["competing_speech"] and side["n_leak_rows_without_floor"] == 0
    kws = comp["kws"].set_index("stimulus_id")
    assert bool(kws.loc["kws00_talker_es_snr0", "kws_leak"]) and kws.loc["kws00_talker_es_snr0", "delta_acc"] == 1
    assert not bool(kws.loc["kws01_talker_es_snr0", "kws_leak"])
    assert not bool(kws.loc["kws00_talker_es_snr0", "kws_leak_floor"])
    assert pd.isna(kws.loc["kws00_clean", "kws_leak"])


def test_channel_rows_with_snr_99_are_not_clean(fam_ws):
    asr = fr.read_family_scores(fam_ws, "channel")["asr"].set_index("stimulus_id")
    r = asr.loc["asr00_ch_clip_+30db"]
    assert r["snr_db"] == 99 and r["bg_id"] == "clip_+30db" and r["condition"] == "noisy"
    assert r["delta_wer"] == pytest.approx(0.25)             # 1 deletion in 4, clean WER 0
    assert asr.loc["asr00_ch_telephone", "delta_wer"] == 0
    assert (asr.loc["asr00_clean", "bg_id"], asr.loc["asr00_clean", "condition"]) == ("clean", "clean")
    assert asr.loc["asr00_ch_telephone", "applied_to"] == "speech" and "leak_share" not in asr.columns


def test_floor_is_the_clean_hypothesis_against_the_row_distractor():
    out = pd.DataFrame({"item_id": ["a", "a", "b", "b"], "bg_id": ["clean", "talker_fr"] * 2,
                        "snr_db": [np.nan, -10, np.nan, -10], "reference": [REF] * 4,
                        "response": ["a please enter your password", "please enter votre password", REF,
                                     "please enter the password"]}, index=[10, 11, 12, 13])
    man = pd.DataFrame({"condition_family": ["competing_speech"] * 4,
                        "distractor_text": ["", "a votre mot", "", "merci votre"]})
    res = family_columns.add_family_scores(out, man, "asr")
    r = res.loc[11]
    assert r["leak_share"] == 0.25 and r["floor_leak_share"] == pytest.approx(1 / 5)  # "a" by chance
    assert r["floor_n_leak_words"] == 1 and r["floor_n_hyp_words"] == 5
    # mismatch: a's hypothesis against b's distractor text ("votre" again), b's against a's (none)
    assert r["mismatch_leak_share"] == 0.25 and res.loc[13, "mismatch_leak_share"] == 0
    assert np.isnan(res.loc[10, "mismatch_leak_share"]) and res.loc[13, "floor_leak_share"] == 0


def test_background_manifest_with_family_column_scores_as_before(tmp_path):
    base = workspace("demo", data_root=tmp_path / "a")
    tagged = workspace("demo", data_root=tmp_path / "b")
    man, inf = _channel_rows("asr")
    for ws, cf in ((base, None), (tagged, "background")):
        rows = [{**{k: v for k, v in r.items() if k not in ("condition_family", "channel_condition", "applied_to",
                                                               "condition_params")},
                 **({"condition_family": cf} if cf else {})} for r in man]
        _write(ws, "asr", rows, inf)
        score_inference(ws)
    assert base.scores_csv("asr").read_bytes() == tagged.scores_csv("asr").read_bytes()
    assert "condition_family" not in pd.read_csv(base.scores_csv("asr")).columns


def test_family_folders_are_not_models(fam_ws, tmp_path):
    ws = fam_ws.ws                                         # inference/ holds only the family folders
    from aiplib.core.errors import AiplibError

    with pytest.raises(AiplibError, match="no inference files"):
        score_inference(ws)


# ------------------------------------------------------------------------------ tables
@pytest.fixture(scope="module")
def comp_table(fam_ws):
    s = fr.read_family_scores(fam_ws, "competing_speech")
    return fr.competing_table(s["asr"], s["kws"], n_resamples=500, seed=3)


def test_competing_table_values(comp_table):
    t = comp_table.set_index(["condition_id", "snr_db"])
    assert len(t) == 15 and (t["n_items"] == N_ITEMS).all()
    r = t.loc[("talker_fr", -10)]
    assert r["delta_wer_pp"] == pytest.approx(37.5)         # mean of 25 (even) and 50 (odd)
    assert r["delta_wer_ci_low_pp"] <= 37.5 <= r["delta_wer_ci_high_pp"]
    assert 25 <= r["delta_wer_ci_low_pp"] and r["delta_wer_ci_high_pp"] <= 50
    assert r["leak_pct"] == pytest.approx(100 * 6 / 42)     # 6 leak words in 6×4 + 6×3 words
    assert r["leak_ci_low_pct"] <= r["leak_pct"] <= r["leak_ci_high_pct"] and r["leak_floor_pct"] == 0
    assert r["leak_mismatch_pct"] == pytest.approx(r["leak_pct"])   # one text per condition: mismatch = heard
    assert r["asr_verdict"] == "worse" and r["asr_p_bh"] < 0.05
    assert r["delta_acc_pp"] == pytest.approx(50) and r["kws_leak_pct"] == pytest.approx(50)
    assert r["kws_leak_floor_pct"] == 0 and r["kws_leak_mismatch_pct"] == pytest.approx(50)
    top = t.loc[("talker_fr", 10)]
    assert top["delta_wer_pp"] == 0 and top["leak_pct"] == 0 and top["asr_verdict"] == "same"
    # no loops, WER <= 1: the robust view equals the mean (6 items +25 pp, 6 items +50 pp: median 37.5)
    assert (r["delta_wer_capped_pp"], r["median_delta_wer_pp"], r["n_loops"]) == (37.5, 37.5, 0)
    assert r["delta_strict_acc_pp"] == pytest.approx(50) and r["n_non_answers"] == 0
    assert t.loc[("talker_es", 0), "same_voice_control"] and not t.loc[("talker_fr", 0), "same_voice_control"]
    assert (t["n_resamples"] == 500).all() and (t["seed"] == 3).all()
    assert list(comp_table["condition_id"].unique()) == ["talker_fr", "talker_es", "cocktail_fr_it_ru"]
    shown = fr.competing_display(comp_table)
    assert "same voice" in set(shown.df["control"]) and shown.df["ΔWER pp [95% CI]"].iloc[0].startswith("+37.5 [")


# ------------------------------------------------------------------------------ robust view
LOOP = " ".join(["a"] * 20)            # 20 words against 4: 4 substitutions + 16 insertions, WER 5.0
ROBUST_ASR = {  # item -> (clean hypothesis, noisy hypothesis): WER clean -> noisy
    0: (REF, LOOP),                                   # 0 -> 5.0, a noisy loop ("length")
    1: (REF, "please enter the password"),            # 0 -> 0.25
    2: (REF, REF),                                    # 0 -> 0
    3: (REF + " password" * 4, REF),                  # 1.0 (a *clean* loop, "ngram") -> 0
}
ROBUST_KWS = ["Yes.",                                 # correct, strict
              "Yes, the word is yes.",                # correct by the paper's first word; a multi-word non-answer
              "Sorry, I can't hear it.",              # wrong, a non-answer (refusal)
              "No."]                                  # wrong, an answer


def _robust_rows(family, task):
    """Four items, one noisy condition (talker_fr at -10 dB or telephone), the hypotheses above (clean KWS: "Yes.")."""
    man, inf = [], []
    bg, snr = ("talker_fr", -10) if family == "competing_speech" else ("telephone", 99)
    extra = (dict(setting="single", distractor_languages="fr", same_voice_as_target=False, distractor_ids="fr_1",
                  distractor_text="votre mot de passe merci", looped=False,
                  condition_params=json.dumps({"snr_db": snr, "languages": "fr"}))
             if family == "competing_speech" else
             dict(channel_condition=bg, applied_to="speech", condition_params=json.dumps(CHANNEL[bg])))
    for k in range(4):
        item = f"{task}{k:02d}"
        spec = {"transcript": REF} if task == "asr" else {"keyword": "yes", "is_target": True}
        clean, noisy = ROBUST_ASR[k] if task == "asr" else ("Yes.", ROBUST_KWS[k])
        man.append({**_base(f"{item}_clean", item, "clean", 99, "clean", len(man), family), **spec})
        inf.append({"id": f"{item}_clean", "raw": clean})
        man.append({**_base(f"{item}_{bg}", item, bg, snr, f"x_{bg}", len(man), family), **spec, **extra})
        inf.append({"id": f"{item}_{bg}", "raw": noisy})
    return man, inf


@pytest.fixture(scope="module")
def robust_scores(tmp_path_factory):
    wf = WithFamily(workspace("demo", data_root=tmp_path_factory.mktemp("robust")))
    out = {}
    for family in ("competing_speech", "channel"):
        view = wf.with_family(family)
        for task in ("asr", "kws"):
            _write(view, task, *_robust_rows(family, task))
        score_inference(view)
        out[family] = fr.read_family_scores(wf, family)
    return out


def test_one_looping_hypothesis_inflates_the_mean_not_the_robust_view(robust_scores):
    s = robust_scores["competing_speech"]
    asr = s["asr"].set_index("stimulus_id")
    assert asr.loc["asr00_talker_fr", "wer"] == 5.0 and asr.loc["asr03_clean", "wer"] == 1.0
    assert asr.loc["asr00_talker_fr", "loop_kind"] == "length" and asr.loc["asr03_clean", "loop_kind"] == "ngram"
    r = fr.competing_table(s["asr"], s["kws"], n_resamples=200, seed=0).iloc[0]
    assert (r["condition_id"], r["snr_db"], r["n_items"]) == ("talker_fr", -10, 4)
    assert r["delta_wer_pp"] == pytest.approx(106.25)         # (500 + 25 + 0 - 100) / 4, the paper's mean
    assert r["delta_wer_capped_pp"] == pytest.approx(6.25)    # (100 + 25 + 0 - 100) / 4, min(WER, 1) each side
    assert r["median_delta_wer_pp"] == pytest.approx(12.5)    # median of 500, 25, 0, -100
    assert r["n_loops"] == 1                                  # the noisy loop; the clean one is not counted
    assert r["delta_acc_pp"] == pytest.approx(50)             # 4/4 -> 2/4 by the paper's first-word rule
    assert r["delta_strict_acc_pp"] == pytest.approx(75)      # 4/4 -> 1/4: non-answers count wrong
    assert r["n_non_answers"] == 2
    shown = fr.competing_display(pd.DataFrame([r])).df.iloc[0]
    assert (shown["ΔWER pp [95% CI]"], shown["capped ΔWER pp"], shown["median ΔWER pp"], shown["loops"]) == (
        "+106.2", "+6.2", "+12.5", "1")                       # 4 items: no interval
    assert (shown["Δ strict acc pp"], shown["non-answers"]) == ("+75.0", "2")


def test_channel_table_robust_view(robust_scores):
    s = robust_scores["channel"]
    c = fr.channel_table(s["asr"], s["kws"], n_resamples=200, seed=0).set_index("condition").loc["telephone"]
    assert (c["delta_wer_pp"], c["delta_wer_capped_pp"], c["median_delta_wer_pp"], c["n_loops"]) == pytest.approx(
        (106.25, 6.25, 12.5, 1))
    assert (c["delta_acc_pp"], c["delta_strict_acc_pp"], c["n_non_answers"]) == pytest.approx((50, 75, 2))
    shown = fr.channel_display(c.to_frame().T.reset_index(names="condition")).df.iloc[0]
    assert (shown["capped ΔWER pp"], shown["loops"], shown["Δ strict acc pp"], shown["non-answers"]) == (
        "+6.2", "1", "+75.0", "2")


def test_robust_view_without_the_flags_is_nan(robust_scores):
    """Scores written before the loop / strict flags: the robust columns that need them are NaN, shown "–"."""
    s = robust_scores["competing_speech"]
    asr = s["asr"].drop(columns=["is_loop"])
    kws = s["kws"].drop(columns=["correct_strict", "non_answer"])
    r = fr.competing_table(asr, kws, n_resamples=200, seed=0).iloc[0]
    assert r["delta_wer_capped_pp"] == pytest.approx(6.25) and np.isnan(r["n_loops"])
    assert np.isnan(r["delta_strict_acc_pp"]) and np.isnan(r["n_non_answers"])
    shown = fr.competing_display(pd.DataFrame([r])).df.iloc[0]
    assert (shown["loops"], shown["Δ strict acc pp"], shown["non-answers"]) == ("–", "–", "–")


def _draw_figure_cell(ws, table):
    """Run notebook 09's Figure F1 cell (it draws from :func:`fr.competing_figure_data`) on ``table``."""
    src = (Path(__file__).parents[1] / "notebooks" / "09_make_figures.py").read_text(encoding="utf-8")
    cell = next(c for c in src.split("# %%") if "fr.competing_figure_data(" in c)
    rt = type("rt", (), {"show_figure": staticmethod(lambda *a, **k: None)})
    ns = dict(fr=fr, rt=rt, ws=ws, competing=table, family_scores={"competing_speech": {"asr": True}})
    exec(cell.split("\n", 1)[1], ns)
    return ns["fig"]


@pytest.mark.slow
def test_competing_figure(comp_table, tmp_path):
    fig = _draw_figure_cell(workspace("demo", data_root=tmp_path), comp_table)
    axes = fig.get_axes()
    assert len(axes) == 2
    for ax in axes:
        assert list(ax.get_xticks()) == list(SNRS)
    dashed = [ln for ln in axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_label() == "talker_es (same voice)"
    solid = {ln.get_label(): ln for ln in axes[1].get_lines() if ln.get_linestyle() == "-"}
    assert solid["talker_fr"].get_ydata()[0] == pytest.approx(100 * 6 / 42)


def test_channel_table_and_skipped(fam_ws):
    s = fr.read_family_scores(fam_ws, "channel")
    sk = pd.read_csv(fr.family_path(fam_ws, "channel", "manifests", "skipped.csv"))
    t = fr.channel_table(s["asr"], s["kws"], skipped=sk, n_resamples=500, seed=0)
    assert list(t["condition"]) == ["telephone", "amr_nb_12k2", "clip_+30db"]   # the grid's order
    c = t.set_index("condition")
    assert c.loc["clip_+30db", "delta_wer_pp"] == pytest.approx(12.5)
    assert c.loc["clip_+30db", "delta_wer_ci_low_pp"] <= 12.5 <= c.loc["clip_+30db", "delta_wer_ci_high_pp"]
    assert c.loc["clip_+30db", "asr_test"] == "sign" and c.loc["clip_+30db", "asr_verdict"] == "worse"
    assert c.loc["clip_+30db", "delta_acc_pp"] == pytest.approx(50) and c.loc["clip_+30db", "kws_test"] == "mcnemar_exact"
    assert c.loc["telephone", "delta_wer_pp"] == 0 and c.loc["telephone", "asr_verdict"] == "same"
    assert c.loc["telephone", "parameters"] == "transform=telephone, high_hz=3400, low_hz=300"
    assert c.loc["telephone", "applied_to"] == "speech" and c.loc["telephone", "n_items"] == N_ITEMS
    assert c.loc["amr_nb_12k2", "status"] == "skipped" and "AMR-NB encoder" in c.loc["amr_nb_12k2", "note"]
    assert "skipped" in set(fr.channel_display(t).df["ASR verdict"])


def test_conditions_listing(fam_ws):
    default = fr.conditions_listing()
    cs = default[default["family"] == "competing_speech"].set_index("condition")
    assert list(cs.index) == ["talker_fr", "talker_it", "talker_ru", "talker_es", "talker_en", "cocktail_fr_it_ru"]
    assert "same voice as the target" in cs.loc["talker_es", "parameters"]
    assert "voices=en_US_f_Allison" in cs.loc["talker_en", "parameters"]
    assert "SNR=-10,-5,0,5,10 dB" in cs.loc["talker_fr", "parameters"] and "June Wallack" in cs.loc["talker_fr", "source"]
    assert "3 streams at equal power" in cs.loc["cocktail_fr_it_ru", "parameters"]
    ch = default[default["family"] == "channel"].set_index("condition")
    assert "telephone" in ch.index and ch.loc["telephone", "parameters"]
    s = fr.read_family_scores(fam_ws, "channel")["asr"]
    run = fr.conditions_listing(fr.read_family_scores(fam_ws, "competing_speech")["asr"], s)
    r = run.set_index("condition")
    assert list(r.index[:3]) == ["talker_fr", "talker_es", "cocktail_fr_it_ru"]
    assert r.loc["telephone", "status"] == "run" and r.loc["telephone", "applied_to"] == "speech"
    assert r.loc["cut_head_300ms", "status"] in ("available",) or r.loc["cut_head_300ms", "status"].startswith("skipped")
    # a user's own distractors (paper/custom): voices and sources come from the run's table, not the demo's list
    table = pd.DataFrame([dict(language="fr", voice="fleurs_fr_0042", same_voice_as_target="False",
                               source="FLEURS fr_fr test", licence="CC BY 4.0", attribution="Google FLEURS"),
                          dict(language="es", voice="cv_es_17", same_voice_as_target="False",
                               source="Common Voice 17 es", licence="CC0", attribution="Mozilla")])
    own = fr.conditions_listing(fr.read_family_scores(fam_ws, "competing_speech")["asr"], s,
                                distractors=table).set_index("condition")
    assert own.loc["talker_fr", "source"] == "FLEURS fr_fr test: Google FLEURS, CC BY 4.0"
    assert "voices=cv_es_17" in own.loc["talker_es", "parameters"]
    assert "same voice" not in own.loc["talker_es", "parameters"] and "Asterisk" not in own.loc["talker_es", "source"]


@pytest.mark.slow
def test_notebook_09_writers(fam_ws):
    ws = fam_ws.ws
    comp = fr.read_family_scores(fam_ws, "competing_speech")
    t = fr.write_family_table(ws, "competing_speech", comp, n_resamples=200, seed=0)
    back = pd.read_csv(ws.tables_dir / "competing_speech.csv")
    assert len(back) == len(t) == 15 and back["delta_wer_pp"].max() == pytest.approx(37.5)
    _draw_figure_cell(ws, t)
    assert (ws.figures_dir / "figure_competing_speech.png").is_file()
    assert (ws.figures_dir / "figure_competing_speech.pdf").is_file()
    fr.write_family_table(ws, "channel", fr.read_family_scores(ws, "channel"), n_resamples=200, seed=0)  # the layout without views
    ch = pd.read_csv(ws.tables_dir / "channel_conditions.csv", keep_default_na=False)
    assert list(ch["status"]) == ["run", "skipped", "run"] and ch["note"].iloc[1].startswith("no AMR-NB")
    assert fr.stage7_times(ws) is None
    (ws.root / "checks").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"run_start": ["t0", "t1", "t1"], "condition_family": ["channel", "channel", "competing_speech"],
                  "seconds": ["5.0", "7.5", "0"], "n_run": ["10", "12", "0"]}).to_csv(
        ws.root / "checks" / "stage7_families.csv", index=False)
    times = fr.stage7_times(ws)
    assert list(times["condition_family"]) == ["channel"] and times["seconds"].iloc[0] == "7.5"


def test_suite_families():
    assert fs.suite_families("background") == ("background",)
    assert fs.suite_families("all") == ("background", "competing_speech", "channel")
    assert fs.suite_families("channel,background") == ("background", "channel")
    with pytest.raises(Exception, match="unknown condition family"):
        fs.suite_families("chanel")


def test_stale_family_scores_are_named_not_shown(tmp_path):
    """A default run on changed items leaves a SUITE=all run's family scores behind: notebook 09 names
    them (stale_reasons) instead of showing them beside the new background results."""
    import os

    from aiplib.core.hashing import file_sha256
    from aiplib.scoring.families import stale_reasons

    ws = workspace("demo", data_root=tmp_path)
    bank = ws.item_bank("asr")
    bank.write_text('{"item_id": "a01"}\n')
    view = ws.with_family("channel")
    manifest = view.manifest_csv("asr")
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text("id\na01_clean\n")
    manifest.with_suffix(".stamp.json").write_text(json.dumps({"inputs": {"itembanks/asr.jsonl": file_sha256(bank)}}))
    scores = view.scores_csv("asr")
    scores.parent.mkdir(parents=True, exist_ok=True)
    scores.write_text("stimulus_id\na01_clean\n")
    assert stale_reasons(ws, "channel") == [] and stale_reasons(ws, "competing_speech") == []
    os.utime(manifest, (scores.stat().st_mtime + 10,) * 2)           # manifest rebuilt after scoring
    assert stale_reasons(ws, "channel") == [
        "results/scores/channel/asr.csv: older than manifests/channel/asr.csv (re-run make all SUITE=channel)"]
    bank.write_text('{"item_id": "a01"}\n{"item_id": "a02"}\n')         # an item added since
    assert stale_reasons(ws, "channel") == [
        "results/scores/channel/asr.csv: built from an older itembanks/asr.jsonl (re-run make all SUITE=channel)"]
