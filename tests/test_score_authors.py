"""Scoring the authors' published outputs (IvLabs/AIP-Speech layout) with no GPU: a fixture folder
shaped like theirs — manifests/asr.csv, kws.csv with their columns only, inference/<model>/<task>.jsonl
rows with their field names (manifest columns + raw, model, task; NaN bg_path on clean rows;
{id, raw: "__ERROR__", error, model, task} failures) — written here, then stages 8–9.

Texts are lower-case and punctuation-free so the hand-computed WERs hold for any normaliser."""
import json
import math

import pandas as pd
import pytest
from paper_tables import write_tables

from aiplib.core.workspace import workspace
from aiplib.scoring.score import main as score_main

BGS = ["esc_rain", "snsd_cafeteria", "noisex_babble", "NA"]  # "NA" must stay a string
ASR = {"1089-134686-0000": ("the cat sat on the mat", "us"), "cv_ab12cd34_0": ("hello world", "indian")}
KWS = {"kws_yes_0a": ("yes", True), "kws_nt_silence_0b": ("silence", False)}


def _manifest(fam, items):
    rows, seed = [], 0 if fam == "asr" else 10000
    for item, (text, extra) in items.items():
        spec = {"accent": extra, "gender": "female", "transcript": text} if fam == "asr" else \
            {"keyword": text, "is_target": extra}
        rows.append({"id": f"{item}_clean", "speech_id": item, "background_id": "clean", "snr_db": 99,
                     "condition": "clean", "seed": seed, "speech_path": f"data/speech/{item}.flac", "bg_path": "",
                     **spec})
        seed += 1
        for bg in BGS:
            for snr in (10, 5, 0):
                rows.append({"id": f"{item}_{bg}_snr{snr}", "speech_id": item, "background_id": bg, "snr_db": snr,
                             "condition": "noisy", "seed": seed, "speech_path": f"data/speech/{item}.flac",
                             "bg_path": f"data/bg/{bg}.wav", **spec})
                seed += 1
    return pd.DataFrame(rows)


def _asr_raw(row):
    if row["id"] == "1089-134686-0000_esc_rain_snr0":
        return None  # generation failed
    if row["speech_id"] == "1089-134686-0000":
        return "the cat sat on the mat" if row["condition"] == "clean" else "the cat sat on the"  # 1/6
    return "hello world" if row["condition"] == "clean" else "hello word"  # 1/2


def _kws_raw(row):
    if row["speech_id"] == "kws_yes_0a":
        return "Yes" if row["condition"] == "clean" or row["snr_db"] != 0 else "no"
    return "SILENCE"


def _write_authors_folder(root):
    man_dir, inf_dir = root / "manifests", root / "inference"
    man_dir.mkdir(parents=True)
    lines = {}
    for fam, items, rawf in (("asr", ASR, _asr_raw), ("kws", KWS, _kws_raw)):
        m = _manifest(fam, items)
        m.to_csv(man_dir / f"{fam}.csv", index=False)
        back = pd.read_csv(man_dir / f"{fam}.csv")  # as their script read it (NaN bg_path, "NA" -> NaN!)
        out = []
        for (_, r), orig in zip(back.iterrows(), m.to_dict("records")):
            raw = rawf(orig)
            if raw is None:
                out.append(json.dumps({"id": r["id"], "raw": "__ERROR__", "error": "CUDA out of memory",
                                       "model": "qwen25_omni_3b", "task": fam}))
            else:
                d = {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                out.append(json.dumps({**d, "raw": raw, "model": "qwen25_omni_3b", "task": fam}, ensure_ascii=False))
        lines[fam] = out
    (inf_dir / "qwen25_omni_3b").mkdir(parents=True)
    for fam, out in lines.items():
        data = ("\n".join(out) + "\n").encode()
        if fam == "asr":
            data += b'{"id": "bad\xff line"}\n'  # one line that is not UTF-8
        (inf_dir / "qwen25_omni_3b" / f"{fam}.jsonl").write_bytes(data)
    (inf_dir / "qwen25_omni_3b" / "sqa.jsonl").write_text('{"id": "sqa_0_clean", "raw": "x"}\n')
    return man_dir, inf_dir


@pytest.mark.parametrize("with_manifests", [True, False])
def test_authors_outputs_scored_without_gpu(tmp_path, with_manifests, capsys):
    man_dir, inf_dir = _write_authors_folder(tmp_path / "theirs")
    args = ["--profile", "paper", "--data-root", str(tmp_path / "data"), "--inference-dir", str(inf_dir)]
    if with_manifests:
        args += ["--manifests-dir", str(man_dir)]
    with pytest.warns(UserWarning, match="sqa"):
        assert score_main(args) == 0
    assert "asr: 25 rows scored, 1 __ERROR__ stimuli dropped, 1 unreadable lines" in capsys.readouterr().out
    ws = workspace("paper", data_root=tmp_path / "data")
    asr = pd.read_csv(ws.results / "scores" / "asr.csv", dtype={"item_id": str, "bg_id": str},
                      keep_default_na=False, na_values={"snr_db": [""], "delta_wer": [""]})
    assert len(asr) == 25 and asr["stimulus_id"].is_unique
    assert set(asr["prompt_set"]) == {"unrecorded"}  # the authors' rows name no prompt set
    a = asr.set_index("stimulus_id")
    s1, s2 = "1089-134686-0000", "cv_ab12cd34_0"
    assert "1089-134686-0000_esc_rain_snr0" not in a.index  # the __ERROR__ row
    assert a.loc[f"{s1}_clean", "wer"] == 0 and a.loc[f"{s1}_clean", "bg_id"] == "clean"
    assert math.isnan(a.loc[f"{s1}_clean", "snr_db"]) and a.loc[f"{s1}_clean", "condition"] == "clean"
    assert a.loc[f"{s1}_esc_rain_snr10", "delta_wer"] == pytest.approx(1 / 6)
    assert a.loc[f"{s2}_NA_snr5", "delta_wer"] == pytest.approx(0.5) and a.loc[f"{s2}_NA_snr5", "bg_id"] == "NA"
    assert a.loc[f"{s2}_NA_snr5", "snr_db"] == 5 and a.loc[f"{s2}_NA_snr5", "item_id"] == s2
    assert a.loc[f"{s2}_NA_snr5", "accent_group"] == "indian"
    noisy = asr[asr["bg_id"] != "clean"]
    # by hand: 11 rows of 1/6 and 12 rows of 1/2
    assert noisy["delta_wer"].mean() == pytest.approx((11 / 6 + 12 / 2) / 23)
    assert list(asr.columns[-2:]) == ["condition", "bg_active"]
    side = json.loads((ws.results / "scores" / "asr.json").read_text())
    assert side["n_errors"] == {"qwen25_omni_3b": 1} and side["n_malformed_lines"] == {"qwen25_omni_3b": 1}
    assert side["manifest_source"] == ("manifests" if with_manifests else "inference rows")
    kws = pd.read_csv(ws.results / "scores" / "kws.csv", keep_default_na=False, na_values={"delta_acc": [""]})
    k = kws.set_index("stimulus_id")
    assert len(kws) == 26
    assert k.loc["kws_yes_0a_esc_rain_snr0", "delta_acc"] == 1 and k.loc["kws_yes_0a_esc_rain_snr5", "delta_acc"] == 0
    assert k.loc["kws_nt_silence_0b_clean", "correct"] == 1  # "SILENCE" on a non-keyword clip
    # accuracy by SNR, by hand: target item wrong at 0 dB on all 4 backgrounds
    acc0 = kws[kws["snr_db"].astype(str).isin(["0", "0.0"])]["correct"].mean()
    assert acc0 == pytest.approx(4 / 8)

    from aiplib.analysis.paper import background_ranking
    from aiplib.io.formats import load_scores

    written = write_tables(ws, n_resamples=50, seed=0)
    assert not background_ranking(load_scores(ws), n_resamples=50).empty    # Figure 4's table (notebook 09 draws it)
    assert any(str(p).endswith(".csv") for p in map(str, written.values()))
    assert any((ws.results / "tables").glob("*.csv"))


# ------------------------------------------------------------------------------------------------
# the authors' per-background mean (flat over rows) on a fixture in their format with one failure
# ------------------------------------------------------------------------------------------------
A_TEXT, B_TEXT = "one two three four five", "alpha beta gamma delta epsilon zeta eta theta"
# errors per (background, SNR) of item A (5 words) and B (8 words); None = __ERROR__
ERRS = {"esc_rain": {"a": (0, 1, None), "b": (0, 1, 3)},      # flat 0.7 / 5 = 14.00 pp
        "esc_dog": {"a": (1, 1, 0), "b": (1, 1, 2)},          # flat = balanced = 15.00 pp
        "esc_wind": {"a": (0, 0, 0), "b": (0, 0, 0)}}         # 0 pp


def _hyp(text, n_err):
    w = text.split()
    return " ".join(["x"] * n_err + w[n_err:])


def _write_flat_fixture(root):
    from types import SimpleNamespace

    from authors_schema import inference_line, write_jsonl, write_manifest

    (root / "manifests").mkdir(parents=True)
    where = SimpleNamespace(manifests=root / "manifests")
    bgs = list(ERRS)
    asr_rows, kws_rows = [], []
    for item, text in (("a", A_TEXT), ("b", B_TEXT)):
        asr_rows.append(dict(item_id=f"item_{item}", bg_id="clean", reference=text))
        asr_rows += [dict(item_id=f"item_{item}", bg_id=bg, snr_db=snr, reference=text)
                     for bg in bgs for snr in (10, 5, 0)]
    kws_rows.append(dict(item_id="kws_yes_0a", bg_id="clean", reference="yes", is_target=True))
    kws_rows += [dict(item_id="kws_yes_0a", bg_id=bg, snr_db=snr, reference="yes", is_target=True)
                 for bg in bgs for snr in (10, 5, 0)]
    asr = write_manifest(where, "asr", asr_rows)
    kws = write_manifest(where, "kws", kws_rows)
    lines = []
    for r in asr.to_dict("records"):
        text = r["transcript"]
        if r["condition"] == "clean":
            resp = text
        else:
            k = (10, 5, 0).index(int(r["snr_db"]))
            n_err = ERRS[r["background_id"]][r["speech_id"][-1]][k]
            resp = "__ERROR__" if n_err is None else _hyp(text, n_err)
        lines.append(inference_line(r, model="qwen25_omni_3b", task="asr", response=resp))
    write_jsonl(root / "inference" / "qwen25_omni_3b" / "asr.jsonl", lines)
    write_jsonl(root / "inference" / "qwen25_omni_3b" / "kws.jsonl",
                [inference_line(r, model="qwen25_omni_3b", task="kws", response="yes")
                 for r in kws.to_dict("records")])
    return root / "manifests", root / "inference"


def test_flat_mean_per_background_feeds_figure4_tables_2_and_3(tmp_path):
    """By hand, esc_rain: A 0/5, 1/5, (failed); B 0/8, 1/8, 3/8. The authors' rule
    (noisy.groupby("bg_id")["dwer"].mean()) gives 0.7 / 5 = 14.00 pp; per SNR, then over SNRs
    (ours, beside) gives (0 + 0.1625 + 0.375) / 3 = 17.92 pp. esc_dog is 15.00 pp both ways, so
    the order of esc_rain and esc_dog turns on the rule."""
    from aiplib.io.formats import DESCRIPTOR_TABLE_COLUMNS

    man_dir, inf_dir = _write_flat_fixture(tmp_path / "theirs")
    args = ["--profile", "paper", "--data-root", str(tmp_path / "data"), "--inference-dir", str(inf_dir),
            "--manifests-dir", str(man_dir)]
    assert score_main(args) == 0
    ws = workspace("paper", data_root=tmp_path / "data")
    ws.descriptors.mkdir(parents=True, exist_ok=True)
    desc = pd.DataFrame({c: [0.5, 0.5, 0.5] for c in DESCRIPTOR_TABLE_COLUMNS[1:]})
    desc.insert(0, "bg_id", ["esc_rain", "esc_dog", "esc_wind"])
    desc["zcr"] = [0.3, 0.2, 0.1]
    desc.to_csv(ws.descriptor_csv, index=False)
    written = write_tables(ws, n_resamples=20, seed=0)
    assert "table3_descriptor_values.csv" in written                            # Figure 4's order
    t3 = pd.read_csv(written["table3_descriptor_values.csv"])
    # Table 3 ascending (the authors' order) by the mean of ASR (14.00, 15.00, 0) and KWS (0 each)
    assert list(t3["bg_id"]) == ["esc_wind", "esc_rain", "esc_dog"]
    assert list(t3["mean_degradation_pp"].round(2)) == [0.0, 7.0, 7.5]
    got = t3.set_index("bg_id")["asr_delta_wer_pp"]
    assert round(got["esc_rain"], 2) == 14.00 and round(got["esc_dog"], 2) == 15.00
    assert got["esc_wind"] == 0
    from aiplib.analysis.paper import background_ranking
    from aiplib.io.formats import load_scores

    ranking = background_ranking(load_scores(ws), n_resamples=20)                # Figure 4's table
    assert round(ranking.loc["esc_rain", "asr_delta_wer_pp"], 2) == 14.00
    assert round(ranking.loc["esc_rain", "asr_delta_wer_snr_balanced_pp"], 2) == 17.92
    # Table 2's input: ranks of (14.00, 15.00, 0) against zcr (0.3, 0.2, 0.1): r_s = 1 − 6·2/24
    t2 = pd.read_csv(written["table2_descriptor_correlations.csv"])
    z = t2[(t2.task == "asr") & (t2.model == "pooled") & (t2.descriptor == "zcr")].iloc[0]
    assert z.r_s == pytest.approx(0.5)      # the SNR-balanced input (17.92 > 15) would give 1.0


def test_provenance_of_the_authors_files_names_the_paper_prompt_set(tmp_path):
    from aiplib.analysis.provenance import collect_provenance
    from aiplib.inference.prompts import PROMPTS

    man_dir, inf_dir = _write_flat_fixture(tmp_path / "theirs")
    assert score_main(["--profile", "paper", "--data-root", str(tmp_path / "data"),
                       "--inference-dir", str(inf_dir), "--manifests-dir", str(man_dir)]) == 0
    rec = collect_provenance(workspace("paper", data_root=tmp_path / "data"))
    assert rec["prompt_set"]["prompt_set"] == "paper" and rec["prompt_set"]["source"]["fetched"] is False
    assert rec["prompt_set"]["source"]["path"] == "scripts/05_inference.py"
    demo_texts = {v["text"] for v in PROMPTS.values()}
    assert all(t["prompt_set"] == "paper" and t["text"] not in demo_texts for t in rec["tasks"].values())


# ------------------------------------------------------------------------------------------------
# `make score PROFILE=paper` on a folder holding only the authors' inference files, through notebook 09
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def authors_make_score(tmp_path_factory):
    """``make score PROFILE=paper INFERENCE_DIR=<theirs> DATA_ROOT=<root>`` (no MANIFESTS_DIR: their rows
    carry the manifest columns) on :mod:`authors_paper_run`'s files, with stage 4's descriptor table in
    the data folder. Returns ``(completed process, workspace)``."""
    import os
    import subprocess
    from pathlib import Path

    import authors_paper_run as run

    root = tmp_path_factory.mktemp("authors_make_score")
    inference_dir, _ = run.write_authors_run(root / "theirs")
    ws = workspace("paper", data_root=root / "data")
    run.write_descriptors(ws)
    env = {**os.environ, "AIP_SMOKE": "1"}
    env.pop("MAKEFLAGS", None)
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(["make", "--no-print-directory", "score", "PROFILE=paper",
                           f"INFERENCE_DIR={inference_dir}", f"DATA_ROOT={root / 'data'}"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return done, ws


@pytest.mark.slow
def test_make_score_on_the_authors_files_runs_notebook_09_to_the_end(authors_make_score):
    done, ws = authors_make_score
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    tables = {p.stem for p in ws.tables_dir.glob("*.csv")}
    figures = {p.stem for p in ws.figures_dir.glob("*.png")}
    from aiplib.analysis.paper import FIGURE_NAMES, TABLE_NAMES

    assert set(TABLE_NAMES) <= tables and set(FIGURE_NAMES) <= figures
    report = (ws.results / "report.md").read_text()
    # the partial model is kept, visibly, and the answer rules are shown
    assert "rule for partial models: keep; every scored row of qwen25_omni_3b is kept" in report
    assert 'answers of asr: clean-up none (0 changed); null answer text_none (1 read as "None")' in report


@pytest.mark.slow
def test_make_score_keeps_every_scored_row_of_the_partial_model(authors_make_score):
    """qwen25_omni_3b has one unretried __ERROR__ row (babble, 0 dB): every paper table keeps its other
    rows. Pooled babble ASR ΔWER = the flat mean over every model's scored noisy babble rows."""
    import authors_paper_run as run

    _, ws = authors_make_score
    asr = pd.read_csv(ws.scores_csv("asr"), keep_default_na=False, na_values={"delta_wer": [""]})
    babble = asr[asr["bg_id"] == "noisex_babble"]
    assert len(babble) == 2 * 4 * 3 - 1  # two models × 4 items × 3 SNRs, one failure left out
    assert run.FAILED[2] not in set(babble.loc[babble["model"] == "qwen25_omni_3b", "stimulus_id"])
    # the retried stimulus has its answer; the null answer is scored as the text "None"
    a = asr.set_index(["model", "stimulus_id"])
    assert a.loc[("qwen2_audio_7b", run.RETRIED[2]), "response"] != "__ERROR__"
    assert a.loc[("qwen2_audio_7b", run.NULL_ANSWER[2]), "response"] == "None"
    assert a.loc[("qwen2_audio_7b", run.NULL_ANSWER[2]), "wer"] == 1.0
    flat = 100 * babble["delta_wer"].mean()
    only_complete = 100 * babble.loc[babble["model"] == "qwen2_audio_7b", "delta_wer"].mean()
    t3 = pd.read_csv(ws.tables_dir / "table3_descriptor_values.csv").set_index("bg_id")
    assert t3.loc["noisex_babble", "asr_delta_wer_pp"] == pytest.approx(flat)
    assert flat != pytest.approx(only_complete)  # what leaving the model out would give
    # by hand from the fixture: k of an item's n words replaced (k + 1 for the second model) gives
    # ΔWER k / n; the first model's preamble item is left out here (its preamble shifts the alignment)
    words = [len(t.split()) for t, _ in run.ASR_ITEMS.values()]
    by_hand = [(k + m) / n for m in (0, 1) for i, n in enumerate(words) for k in run.ERRORS["noisex_babble"]
               if not (m == 0 and i == 3)]
    by_hand.remove(5 / words[0])  # the failed stimulus: item 0 at 0 dB (k = 4 + 1), second model
    plain = babble[~((babble["model"] == run.MODELS[0]) & (babble["item_id"] == run.PREAMBLE_ITEM))]
    assert 100 * plain["delta_wer"].mean() == pytest.approx(100 * sum(by_hand) / len(by_hand))
    t2 = pd.read_csv(ws.tables_dir / "table2_descriptor_correlations.csv")
    assert set(t2["model"]) == {"pooled", "qwen2_audio_7b", "qwen25_omni_3b"}
    t5 = pd.read_csv(ws.tables_dir / "table5_prompt_steering_rer.csv")
    assert set(t5["model"]) == {"qwen2_audio_7b", "qwen25_omni_3b"}
    t4 = pd.read_csv(ws.tables_dir / "table4_accent_dwer.csv")
    assert set(t4["model"]) == {"qwen2_audio_7b", "qwen25_omni_3b"}


@pytest.mark.slow
def test_make_score_writes_table3_ascending_and_the_authors_table4(authors_make_score):
    import authors_paper_run as run

    _, ws = authors_make_score
    t3 = pd.read_csv(ws.tables_dir / "table3_descriptor_values.csv")
    assert t3["mean_degradation_pp"].is_monotonic_increasing
    assert list(t3["bg_id"]) == ["esc_wind", "esc_dog", "musan_hubbub", "noisex_babble"]
    # README-named Table 4: the authors' flat mean over noisy rows per accent label
    asr = pd.read_csv(ws.scores_csv("asr"), keep_default_na=False, na_values={"delta_wer": [""]})
    noisy = asr[(asr["bg_id"] != "clean") & (asr["model"] == "qwen2_audio_7b")]
    us = noisy[noisy["accent"] == "american_english"]
    t4 = pd.read_csv(ws.tables_dir / "table4_accent_dwer.csv").set_index(["model", "accent_label"])
    assert t4.loc[("qwen2_audio_7b", "US English (anon)"), "mean_delta_wer_pp"] == pytest.approx(
        100 * us["delta_wer"].mean())
    ours = pd.read_csv(ws.tables_dir / "table4_accent_dwer_item_means.csv")
    assert "item_mean_delta_wer_pp" in ours.columns and "mean_delta_wer_pp" not in ours.columns
    assert len(run.ASR_ITEMS) == 4
