"""aiplib.explore.data / ui: notebook 10's explorer, checked on real values.

The workspace is the synthetic one of ``conftest.make_tiny_workspace`` (2 ASR items, 2 KWS clips,
20 noise backgrounds) with manifests, a made-up descriptor table, and made-up inference rows
(and, for some tests, hand-written score files) whose values are known in advance.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import make_tiny_workspace

from aiplib.core.errors import AiplibParameterError
from aiplib.explore import data as xd
from aiplib.explore import ui as xu
from aiplib.io.formats import DESCRIPTORS, read_manifest
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import build_manifests
from aiplib.stimuli.mixing import achieved_snr_db

ASR_MODEL = "fake_asr"
KWS_MODEL = "fake_kws"


NATO = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
        "quebec romeo sierra tango").split()


def fake_asr_response(item_id: str, bg_id: str, snr_db) -> str:
    """Responses of the made-up ASR model; every one names its stimulus, so they all differ.

    Reference of item ``aNN`` is ``word N``; background ``bgJJ`` is called by the J-th NATO word
    (words survive Whisper's normaliser unchanged). Clean: exact (WER 0). ``bg03`` at 0 dB:
    ``bird N at 0 with delta`` (1 substitution + 4 insertions over 2 words: WER 2.5). Others:
    ``word N at <snr> with <word>`` (4 insertions: WER 2.0).
    """
    n = int(item_id[1:])
    if bg_id == "clean":
        return f"word {n}"
    head = "bird" if bg_id == "bg03" and float(snr_db) == 0 else "word"
    return f"{head} {n} at {float(snr_db):g} with {NATO[int(bg_id[2:])]}"


def fake_kws_response(item_id: str, label: str, bg_id: str, snr_db) -> str:
    """Made-up KWS model: right on clean; on ``bg01`` at 0 and 5 dB it says ``maybe`` (a flip for the
    target clip ``k00`` = ``yes``; still correct for the non-target ``k01`` = ``cat``)."""
    if bg_id == "bg01" and float(snr_db) in (0.0, 5.0):
        return "maybe"
    return f"{label}." if label == "yes" else "unknown"


def write_inference(ws, *, asr=True, kws=True, skip=()):
    """Write ``inference/<model>/<task>.jsonl`` for every manifest row (minus ``skip`` ids)."""
    for fam, model, on in (("asr", ASR_MODEL, asr), ("kws", KWS_MODEL, kws)):
        if not on:
            continue
        m = read_manifest(ws, fam)
        path = ws.inference / model / f"{fam}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for r in m.to_dict("records"):  # the authors' row format: manifest columns, raw, model, task
                if r["id"] in skip:
                    continue
                snr = None if r["condition"] == "clean" else float(r["snr_db"])
                resp = (fake_asr_response(r["speech_id"], r["background_id"], snr) if fam == "asr"
                        else fake_kws_response(r["speech_id"], r["keyword"], r["background_id"], snr))
                keep = {k: r[k] for k in ("id", "speech_id", "background_id", "snr_db", "condition", "seed")}
                f.write(json.dumps(dict(keep, raw=resp, model=model, task=fam, prompt_id=f"{fam}_baseline",
                                        decode_s=0.01, audio_s=r["duration_s"])) + "\n")


def write_descriptors(ws):
    """A made-up descriptor table: descriptor k of background j is ``j + k / 10``."""
    ids = pd.read_csv(ws.descriptors / "battery.csv", dtype=str)["bg_id"]
    rows = [{"bg_id": b, **{d: j + k / 10 for k, d in enumerate(DESCRIPTORS)}} for j, b in enumerate(ids)]
    pd.DataFrame(rows, columns=["bg_id", *DESCRIPTORS]).to_csv(ws.descriptors / "acoustic_descriptors.csv",
                                                               index=False)


def make_explorer_workspace(root, *, inference=True):
    """Tiny workspace + manifests + descriptors (+ fake inference rows)."""
    ws = make_tiny_workspace(root)
    build_manifests(ws)
    write_descriptors(ws)
    if inference:
        write_inference(ws)
    return ws


@pytest.fixture
def ws0(tmp_path):
    """Workspace before inference."""
    return make_explorer_workspace(tmp_path, inference=False)


@pytest.fixture
def ws1(tmp_path):
    """Workspace with fake inference rows, no score files."""
    return make_explorer_workspace(tmp_path)


def text_of(markup: str, cls: str) -> str:
    """The text inside the first element of class ``cls`` (nested tags included), spaces collapsed."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        depth, parts = 0, []

        def handle_starttag(self, tag, attrs):
            if self.depth:
                self.depth += 1
            elif cls in (dict(attrs).get("class") or "").split() and not self.parts:
                self.depth = 1

        def handle_endtag(self, tag):
            if self.depth:
                self.depth -= 1

        def handle_data(self, data):
            if self.depth:
                self.parts.append(data)

    p = P()
    p.parts = []
    p.feed(markup)
    return " ".join("".join(p.parts).split())


def row_of(ws, fam, item, bg, snr=None):
    m = read_manifest(ws, fam)
    sel = m[(m["speech_id"] == item) & (m["background_id"] == bg)]
    if bg != "clean":
        sel = sel[sel["snr_db"] == int(snr)]
    assert len(sel) == 1
    return sel.iloc[0].to_dict()


# ------------------------------------------------------------------------------------------- audio
def test_stimulus_audio_is_materialize_sample_for_sample(ws0):
    a = xd.stimulus_audio(ws0, "asr", "a01", "bg07", 5)
    row = row_of(ws0, "asr", "a01", "bg07", 5)
    y, info = materialize(row, ws0)
    assert a["stimulus_id"] == "a01_bg07_snr5" == row["id"]
    assert a["mixture"].dtype == np.float32 and a["mixture"].shape == (24000,)  # a01 lasts 1.5 s
    assert np.array_equal(a["mixture"], y)
    clean, _ = materialize(row_of(ws0, "asr", "a01", "clean"), ws0)
    assert np.array_equal(a["clean"], clean)
    # the background part is the one that was mixed: clean + part == mixture (float32 rounding: the
    # authors' mixer sums in float64)
    assert info.clip_scale == 1.0 and a["info"].clip_scale == 1.0
    assert a["background"].dtype == np.float32
    np.testing.assert_allclose(a["clean"] + a["background"], a["mixture"], atol=1e-6)
    assert achieved_snr_db(a["clean"], a["background"]) == pytest.approx(5.0, abs=1e-4)


def test_stimulus_audio_clean_has_no_background(ws0):
    a = xd.stimulus_audio(ws0, "kws", "k00", "clean")
    assert a["background"] is None
    assert a["stimulus_id"] == "k00_clean"
    assert np.array_equal(a["mixture"], materialize(row_of(ws0, "kws", "k00", "clean"), ws0)[0])


def test_stimulus_audio_unknown_stimulus_lists_valid_values(ws0):
    with pytest.raises(AiplibParameterError, match="backgrounds: bg00, bg01"):
        xd.stimulus_audio(ws0, "asr", "a00", "nope", 5)
    with pytest.raises(AiplibParameterError, match="SNRs"):
        xd.stimulus_audio(ws0, "asr", "a00", "bg00", 7)


def decode_wav(data: bytes):
    """WAV bytes read back with soundfile: ``(y, sr)``, y float32 [shape=(n,)] (PCM_16 ÷ 32768), sr in Hz."""
    import io

    import soundfile as sf

    y, sr = sf.read(io.BytesIO(bytes(data)), dtype="float32", always_2d=False)
    return y, int(sr)


def test_wav_bytes_float32_roundtrip_is_exact_and_pcm16_quantises(ws0):
    y = xd.stimulus_audio(ws0, "asr", "a00", "bg02", 0)["mixture"]
    data = xd.wav_bytes(y)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    back, sr = decode_wav(data)
    assert sr == 16000 and back.dtype == np.float32
    assert np.array_equal(back, y)
    assert len(data) == 58 + 4 * y.shape[0]
    assert xd.wav_bytes(y.copy()) == data  # deterministic: no time stamp in the file
    # 16-bit PCM, for comparison: off by up to one step of 1/32768 (written ×32767, read ÷32768)
    # — the loss a float WAV avoids
    d16 = xd.wav_bytes(y, subtype="PCM_16")
    assert len(d16) == 44 + 2 * y.shape[0]
    back16, _ = decode_wav(d16)
    assert not np.array_equal(back16, y)
    assert np.max(np.abs(back16 - y)) <= 1 / 32768
    with pytest.raises(AiplibParameterError):
        xd.wav_bytes(np.array([0.0, np.nan], dtype=np.float32))


def test_log_mel_shape_and_range():
    """aiplib's own log-mel (the spectrograms the explorer draws): shape, dB scale shared by the
    signals, floor, and a 1 kHz tone in the band around 1 kHz."""
    t = np.arange(16000) / 16000
    y = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    spectrograms = xu.log_mel_spectrograms({"tone": y, "quieter": 0.1 * y})
    S = spectrograms["tone"]
    assert S.shape == (64, 1 + 16000 // 160)
    assert S.max() == pytest.approx(0.0, abs=1e-4) and S.min() >= -80.0 - 1e-3
    # one scale: the quieter copy sits 20 dB (×0.1 in amplitude) below the tone
    assert spectrograms["quieter"].max() == pytest.approx(-20.0, abs=0.01)
    # the 1 kHz tone's energy sits in the band around 1 kHz
    import librosa

    centres = librosa.mel_frequencies(n_mels=66, fmin=0, fmax=8000)[1:-1]
    peak_band = int(np.argmax(S[:, 50]))
    assert abs(centres[peak_band] - 1000) < 120
    png = xu.signals_figure_png({"tone": y}, title="tone")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# ------------------------------------------------------------------------------- results lookups
def test_available_tasks_and_models(ws0, tmp_path):
    assert xd.available_tasks(ws0) == ["asr", "kws"]
    assert xd.available_models(ws0, "asr") == []
    write_inference(ws0)
    assert xd.available_models(ws0, "asr") == [ASR_MODEL]
    assert xd.available_models(ws0, "kws") == [KWS_MODEL]


def test_lookup_response_from_inference_scores_it_here(ws1):
    r = xd.lookup_response(ws1, ASR_MODEL, "asr", "a01_bg03_snr0")
    assert r["found"] and r["source"] == "inference"
    assert r["reference"] == "word 1"
    assert r["response"] == "bird 1 at 0 with delta"
    assert r["clean_response"] == "word 1"
    assert r["wer"] == pytest.approx(2.5)  # S=1, I=4, N=2
    assert r["clean_wer"] == 0.0
    assert r["delta_wer"] == pytest.approx(2.5)
    r = xd.lookup_response(ws1, ASR_MODEL, "asr", "a00_bg05_snr10")
    assert r["response"] == "word 0 at 10 with foxtrot" and r["wer"] == pytest.approx(2.0)
    # KWS: target "yes" flips on bg01 at 5 dB; the non-target "cat" stays correct
    k = xd.lookup_response(ws1, KWS_MODEL, "kws", "k00_bg01_snr5")
    assert (k["first_word"], k["correct"], k["clean_correct"], k["delta_acc"]) == ("maybe", False, True, 1.0)
    k = xd.lookup_response(ws1, KWS_MODEL, "kws", "k01_bg01_snr5")
    assert (k["correct"], k["clean_correct"], k["delta_acc"]) == (True, True, 0.0)


def test_lookup_response_missing_row_and_unknown_stimulus(tmp_path):
    ws = make_tiny_workspace(tmp_path)
    build_manifests(ws)
    write_inference(ws, skip={"a00_bg00_snr10"})
    r = xd.lookup_response(ws, ASR_MODEL, "asr", "a00_bg00_snr10")
    assert not r["found"] and r["response"] is None and math.isnan(r["delta_wer"])
    with pytest.raises(AiplibParameterError, match="not in manifests/asr.csv"):
        xd.lookup_response(ws, ASR_MODEL, "asr", "zz_bg00_snr10")


def write_scores(ws):
    """Hand-made score files in the ARCHITECTURE.md format, with known ΔWER / Δacc values."""
    sd = ws.results / "scores"
    sd.mkdir(parents=True, exist_ok=True)
    asr = []
    for item in ("a00", "a01"):
        asr.append(dict(model="m1", task="asr", stimulus_id=f"{item}_clean", item_id=item,
                        bg_id="clean", snr_db="", reference="ref", response="clean says", wer=0.0, delta_wer=""))
    vals = {("a00", "bg00", 10): 0.5, ("a01", "bg00", 10): 0.3, ("a00", "bg02", 0): 0.9,
            ("a01", "bg02", 0): 0.1, ("a00", "bg04", 5): 0.9, ("a00", "bg05", 5): -0.2}
    for (item, bg, snr), d in vals.items():
        asr.append(dict(model="m1", task="asr", stimulus_id=f"{item}_{bg}_snr{snr}", item_id=item,
                        bg_id=bg, snr_db=float(snr), reference="ref", response=f"resp {item} {bg}", wer=d,
                        delta_wer=d))
    pd.DataFrame(asr).to_csv(sd / "asr.csv", index=False)
    kws = [dict(model="m2", task="kws", stimulus_id="k00_clean", item_id="k00", bg_id="clean",
                snr_db="", label="yes", is_target=True, response="yes", first_word="yes", correct=1, delta_acc=""),
           dict(model="m2", task="kws", stimulus_id="k00_bg01_snr0", item_id="k00", bg_id="bg01",
                snr_db=0.0, label="yes", is_target=True, response="no", first_word="no", correct=0, delta_acc=1),
           dict(model="m2", task="kws", stimulus_id="k00_bg01_snr10", item_id="k00", bg_id="bg01",
                snr_db=10.0, label="yes", is_target=True, response="go", first_word="go", correct=0, delta_acc=1),
           dict(model="m2", task="kws", stimulus_id="k00_bg02_snr10", item_id="k00", bg_id="bg02",
                snr_db=10.0, label="yes", is_target=True, response="yes", first_word="yes", correct=1,
                delta_acc=0)]
    pd.DataFrame(kws).to_csv(sd / "kws.csv", index=False)


def test_worst_cases_order_and_columns(ws0):
    assert xd.worst_cases(ws0, "asr").empty
    assert list(xd.worst_cases(ws0, "asr").columns) == xd.WORST_COLUMNS
    write_scores(ws0)
    wc = xd.worst_cases(ws0, "asr", n=4)
    assert list(wc.columns) == xd.WORST_COLUMNS
    # one row per item (its worst stimulus): a00's 0.9 twice, the higher SNR (5 dB) wins; a01's 0.3
    assert wc["stimulus_id"].tolist() == ["a00_bg04_snr5", "a01_bg00_snr10"]
    assert wc["delta"].tolist() == [0.9, 0.3]
    assert wc["condition"].tolist() == ["bg04 @ 5 dB", "bg00 @ 10 dB"]
    # every stimulus: 0.9 twice (higher SNR first), then 0.5, 0.3
    wc = xd.worst_cases(ws0, "asr", n=4, one_per_item=False)
    assert wc["stimulus_id"].tolist() == ["a00_bg04_snr5", "a00_bg02_snr0",
                                          "a00_bg00_snr10", "a01_bg00_snr10"]
    assert wc["delta"].tolist() == [0.9, 0.9, 0.5, 0.3]
    # the negative ΔWER is not a "worst case"
    assert len(xd.worst_cases(ws0, "asr", n=10, one_per_item=False)) == 5
    k = xd.worst_cases(ws0, "kws", one_per_item=False)
    assert k["stimulus_id"].tolist() == ["k00_bg01_snr10", "k00_bg01_snr0"]
    assert k["reference"].tolist() == ["yes", "yes"] and k["response"].tolist() == ["go", "no"]
    assert xd.worst_cases(ws0, "kws")["stimulus_id"].tolist() == ["k00_bg01_snr10"]
    with pytest.raises(AiplibParameterError):
        xd.worst_cases(ws0, "asr", n=0)


def test_explorer_worst_cases_are_the_reports_worst_table(ws0):
    """One ranking: notebook 10's worst cases are notebook 09's Tables R5 / R9, row for row."""
    from aiplib.analysis import stats
    from aiplib.analysis.report_tables import worst_display
    from aiplib.io.formats import load_scores

    write_scores(ws0)
    scores = load_scores(ws0)
    for task in ("asr", "kws"):
        wc = xd.worst_cases(ws0, task, 10)
        table = worst_display(scores[task], task).df
        assert table["stimulus"].tolist() == wc["stimulus_id"].tolist()
        assert table["background @ SNR"].tolist() == wc["condition"].tolist()
        assert stats.worst_stimuli(scores[task], task)["stimulus_id"].tolist() == wc["stimulus_id"].tolist()
    asr = worst_display(scores["asr"], "asr").df
    assert asr["stimulus"].tolist() == ["a00_bg04_snr5", "a01_bg00_snr10"]
    assert asr["ΔWER pp"].tolist() == ["90.0", "30.0"]
    assert asr["WER % clean → noisy"].tolist() == ["0.0 → 90.0", "0.0 → 30.0"]
    assert asr["clean response"].tolist() == ["clean says"] * 2
    kws = worst_display(scores["kws"], "kws").df
    assert kws["stimulus"].tolist() == ["k00_bg01_snr10"]
    assert (kws.loc[0, "label"], kws.loc[0, "clean response"], kws.loc[0, "noisy response"]) == ("yes", "yes", "go")


def test_lookup_response_prefers_the_score_file(ws0):
    write_scores(ws0)
    r = xd.lookup_response(ws0, "m1", "asr", "a00_bg02_snr0")
    assert r["source"] == "scores" and r["response"] == "resp a00 bg02"
    assert (r["wer"], r["clean_wer"], r["delta_wer"]) == (0.9, 0.0, 0.9)
    assert r["clean_response"] == "clean says"
    k = xd.lookup_response(ws0, "m2", "kws", "k00_bg01_snr0")
    assert (k["first_word"], k["correct"], k["clean_correct"], k["delta_acc"]) == ("no", False, True, 1.0)


def test_lookup_matches_real_scoring_of_the_same_rows(ws1):
    """The inference fallback gives the same WER / ΔWER as stage 8's score files."""
    from aiplib.scoring.score import score_inference

    direct = [xd.lookup_response(ws1, ASR_MODEL, "asr", s) for s in
              ("a01_bg03_snr0", "a00_bg05_snr10", "a00_clean")]
    score_inference(ws1)
    for d in direct:
        s = xd.lookup_response(ws1, ASR_MODEL, "asr", d["stimulus_id"])
        assert s["source"] == "scores" and d["source"] == "inference"
        assert s["response"] == d["response"]
        assert s["wer"] == pytest.approx(d["wer"])
        assert (math.isnan(s["delta_wer"]) and math.isnan(d["delta_wer"])) or s["delta_wer"] == pytest.approx(
            d["delta_wer"])
    kd = xd.lookup_response(ws1, KWS_MODEL, "kws", "k00_bg01_snr0")
    assert kd["delta_acc"] == 1.0 and kd["source"] == "scores"
    assert xd.worst_cases(ws1, "kws", one_per_item=False)["stimulus_id"].tolist() == ["k00_bg01_snr5",
                                                                                      "k00_bg01_snr0"]


def test_background_table_values_and_order(ws0):
    t = xd.background_table(ws0)
    assert len(t) == 20 and t.index[0] == "bg00"  # no scores: battery order
    assert t.loc["bg03", "licence"] == "CC0" and t.loc["bg03", "source_package"] == "test"
    assert [t.loc["bg03", d] for d in DESCRIPTORS] == pytest.approx([3 + k / 10 for k in range(9)])
    write_scores(ws0)
    t = xd.background_table(ws0)
    # pooled (one model), mean over SNRs of the item means, in pp: bg02 (90+10)/2, bg04 90, bg00 40, bg05 -20
    assert t["asr_delta_wer_pp"].dropna().to_dict() == pytest.approx({"bg04": 90, "bg02": 50, "bg00": 40,
                                                                      "bg05": -20})
    assert t.loc["bg01", "kws_delta_acc_pp"] == 100 and t.loc["bg02", "kws_delta_acc_pp"] == 0
    # Figure 4's key, the mean of ASR and KWS, exists for bg02 only: (50 + 0) / 2
    assert t.index[0] == "bg02" and t.loc["bg02", "mean_degradation_pp"] == pytest.approx(25)


def test_background_order_is_figure_4s(ws1):
    """The explorer ranks backgrounds exactly as Figure 4: ASR alone would put bg03 first."""
    from aiplib.analysis.paper import background_ranking
    from aiplib.io.formats import load_scores
    from aiplib.scoring.score import score_inference

    score_inference(ws1)
    ranking = background_ranking(load_scores(ws1))
    t = xd.background_table(ws1)
    assert t.index.tolist() == ranking.index.tolist()
    assert t["rank"].tolist() == ranking["rank"].tolist()
    # ASR: ΔWER 2 everywhere, bg03 2.5 at 0 dB -> 216.7 pp; KWS: bg01 flips k00 at 0 and 5 dB -> 33.3 pp;
    # mean: bg01 (200 + 33.3) / 2 = 116.7 before bg03 (216.7 + 0) / 2 = 108.3
    assert t.index[:2].tolist() == ["bg01", "bg03"]
    assert t.loc["bg03", "asr_delta_wer_pp"] == pytest.approx(650 / 3)
    assert t.loc["bg01", "mean_degradation_pp"] == pytest.approx((200 + 100 / 3) / 2)
    np.testing.assert_allclose(t["mean_degradation_pp"], ranking["mean_degradation_pp"])


def test_word_diff_is_the_sdi_alignment():
    from aiplib.core.textnorm import score_asr_row

    d = xd.word_diff("word 1", "Bird 1 at 0 with delta.")
    assert d == [("substitute", "word", "bird"), ("equal", "1", "1"), ("insert", "", "at"),
                 ("insert", "", "0"), ("insert", "", "with"), ("insert", "", "delta")]
    d = xd.word_diff("the cat sat down", "the sat town")
    assert d == [("equal", "the", "the"), ("delete", "cat", ""), ("equal", "sat", "sat"),
                 ("substitute", "down", "town")]
    s = score_asr_row("the cat sat down", "the sat town")
    ops = [o for o, _, _ in d]
    assert (ops.count("substitute"), ops.count("delete"), ops.count("insert")) == (
        s["substitutions"], s["deletions"], s["insertions"])
    assert xd.word_diff("a b", "") == [("delete", "a", ""), ("delete", "b", "")]
    from aiplib.analysis.report_tables import cap_words
    assert cap_words("a b c d e", 3) == "a b c … +2 words"
    assert cap_words("a b c", 3) == "a b c"


def test_descriptor_labels_and_sources():
    assert xd.descriptor_label("spectral_centroid") == ("centroid", "Hz")
    assert xd.descriptor_label("spectral_flatness") == ("flatness", "ratio, 0–1")
    assert xd.descriptor_label("zcr") == ("zero-crossing rate", "crossings per sample")
    assert xd.summarise_sources("bg/a.wav;bg/b.wav;bg/c.wav") == "3 files: bg/a.wav, …"
    assert xd.summarise_sources("bg/a.wav") == "bg/a.wav"
    assert not xd.under_papermill()


# ---------------------------------------------------------------------------------------- widget
@pytest.mark.slow
def test_explorer_before_inference_plays_mixtures_and_says_so(ws0):
    ui = xu.explorer(ws0)
    ex = ui.explorer
    assert "aip-explorer" in ui._dom_classes
    assert ex.controls["model"].disabled
    assert ex.state["message"].startswith("no inference results yet for asr")
    assert "no inference results yet for asr" in ex.status.value
    ex.select(item_id="a01", bg_id="bg07", snr_db=0)
    y, _ = materialize(row_of(ws0, "asr", "a01", "bg07", 0), ws0)
    assert ex.players["mixture"].value == xd.wav_bytes(y)
    assert np.array_equal(decode_wav(ex.players["mixture"].value)[0], y)
    assert "aip-no-response" in ex.response.value
    assert ex.plot.value[:4] == b"\x89PNG"
    # a static representation that does not spell out the audio bytes
    bundle = ui._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "a01_bg07_snr0" in bundle["text/html"] and len(bundle["text/plain"]) < 200
    assert "a01_bg07_snr0" in repr(ui)


@pytest.mark.slow
def test_explorer_changes_follow_the_controls(ws1):
    ui = xu.explorer(ws1)
    ex = ui.explorer
    c = ex.controls
    assert c["model"].value == ASR_MODEL and not c["model"].disabled
    assert [o for o in c["snr"].options] == [("10 dB", 10.0), ("5 dB", 5.0), ("0 dB", 0.0)]
    # drive the drop-downs as a user would: each change refreshes audio and response
    c["bg"].value = "bg03"
    assert ex.state["stimulus_id"] == "a00_bg03_snr10"
    before = ex.players["mixture"].value
    c["snr"].value = 0.0
    sid = "a00_bg03_snr0"
    assert ex.state["stimulus_id"] == sid
    y, _ = materialize(row_of(ws1, "asr", "a00", "bg03", 0), ws1)
    assert ex.players["mixture"].value == xd.wav_bytes(y) != before
    assert np.array_equal(decode_wav(ex.players["clean"].value)[0],
                          materialize(row_of(ws1, "asr", "a00", "clean"), ws1)[0])
    # the response marked against the reference "word 0": one substitution, four insertions
    assert text_of(ex.response.value, "aip-response-text") == "bird 0 at 0 with delta"
    assert ("<span class='aip-sub' title='reference: word'>bird</span> 0 "
            "<span class='aip-ins' title='inserted'>at</span>") in ex.response.value
    assert "S 1 · D 0 · I 4 of 2 reference words" in ex.metrics.value
    assert "ΔWER vs clean <b>+250.0 pp</b>" in ex.metrics.value
    assert ex.state["result"]["delta_wer"] == pytest.approx(2.5)
    # the background panel shows the chosen background's descriptors and licence
    assert "CC0" in ex.bg_info.value and "<td>centroid</td>" in ex.bg_info.value
    assert "<td style='color:#555'>Hz</td>" in ex.bg_info.value
    assert f"<td style='text-align:right'>{3.1:.4g}</td>" in ex.bg_info.value
    # clean: no background player, SNR disabled
    c["bg"].value = "clean"
    assert ex.state["stimulus_id"] == "a00_clean"
    assert c["snr"].disabled and ex.player_boxes["background"].layout.display == "none"
    assert "<span class='aip-response-text'>word 0</span>" in ex.response.value
    # switching task repopulates items and models
    c["task"].value = "kws"
    assert c["model"].value == KWS_MODEL and c["item"].value == "k00"
    ex.select(bg_id="bg01", snr_db=5)
    assert ex.state["stimulus_id"] == "k00_bg01_snr5"
    assert "flip: correct → wrong" in ex.metrics.value


@pytest.mark.slow
def test_explorer_worst_case_button_loads_the_stimulus(ws1):
    from aiplib.scoring.score import score_inference

    score_inference(ws1)
    ui = xu.explorer(ws1)
    ex = ui.explorer
    buttons = ex.worst_buttons
    # ASR: every noisy row has ΔWER 2; the largest (2.5) are bg03 at 0 dB; one row per item
    assert [b.description for b in buttons] == ["bg03 @ 0 dB", "bg03 @ 0 dB"]
    assert ex.worst_cases["item_id"].tolist() == ["a00", "a01"]
    # a compact table: background @ SNR, item, ΔWER (no model column: one model)
    assert ex.worst.layout.grid_template_columns == "repeat(3, max-content)"
    assert [c.value for c in ex.worst.children[4:6]] == ["<code>a00</code>", "+250.0 pp"]
    buttons[1].click()
    assert ex.state["stimulus_id"] == "a01_bg03_snr0"
    assert (ex.controls["item"].value, ex.controls["bg"].value, ex.controls["snr"].value) == ("a01", "bg03", 0.0)
    assert ex.state["result"]["source"] == "scores"
    assert ex.players["mixture"].value == xd.wav_bytes(
        materialize(row_of(ws1, "asr", "a01", "bg03", 0), ws1)[0])
    # clicking the "item" header sorts by item, a second click reverses
    item_head = ex.worst.children[1]
    item_head.click()
    assert ex.worst_cases["item_id"].tolist() == ["a00", "a01"] and ex.worst.children[1].description == "item ▲"
    ex.worst.children[1].click()
    assert ex.worst_cases["item_id"].tolist() == ["a01", "a00"]
    assert ex.worst_buttons[0].tooltip.startswith("a01_bg03_snr0: bird 1 at 0 with delta")
    # the sortable table in Figure 4's order (bg01 then bg03); sorting by a descriptor reorders it
    v = ex.bg_table.value
    assert v.index("data-bg='bg01'") < v.index("data-bg='bg03'") < v.index("data-bg='bg00'")
    assert "centroid<br><small>Hz</small>" in v and "ASR ΔWER<br><small>pp, pooled</small>" in v
    ex.bg_sort.value = "zcr"
    ex.bg_ascending.value = True
    assert ex.bg_table.value.index("data-bg='bg00'") < ex.bg_table.value.index("data-bg='bg03'")
    ex.controls["task"].value = "kws"
    assert [b.description for b in ex.worst_buttons] == ["bg01 @ 5 dB"]  # one item (k00), its worst


def test_long_response_is_capped_and_expandable():
    words = " ".join(["left and"] * 50)  # 100 words, a loop
    h = xu.diff_html(xd.word_diff("go left", words))
    assert text_of(h, "aip-response-text").split() == words.split()[:xu.CAP_WORDS]
    assert f"<summary>… +{100 - xu.CAP_WORDS} words</summary>" in h
    assert text_of(h, "aip-response-rest").split() == words.split()[xu.CAP_WORDS:]


def test_explorer_without_manifests_says_what_to_run(tmp_path):
    from aiplib.core.workspace import workspace

    ui = xu.explorer(workspace("demo", data_root=tmp_path))
    assert "run notebooks 01–05 first" in ui.explorer.status.value
    assert ui.explorer.controls["task"].disabled


@pytest.mark.slow
def test_notebook10_executed_record_is_small_and_lists_the_worst_cases(tmp_path):
    """Run by papermill (as ``make``), notebook 10 stores no widget state (< 100 KB) and prints the
    worst cases as a static table, per condition family: the channel family's (scored here) too, and
    "not run" for competing speech (no manifest, no scores)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from aiplib.scoring.score import score_inference
    from aiplib.stimuli.family_manifests import build_family_manifest

    ws = make_explorer_workspace(tmp_path / "data")
    score_inference(ws)
    ch = ws.with_family("channel")
    for task in ("asr", "kws"):
        build_family_manifest(ws, "channel", task, conditions=CHANNEL)
        write_family_inference(ch, task)
    score_inference(ch)
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "10.ipynb"
    env = dict(os.environ, AIP_DATA_ROOT=str(tmp_path / "data"), AIP_PROFILE="demo",
               PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-m", "papermill", "--cwd", str(root / "notebooks"),
                    str(root / "notebooks" / "10_listen_and_explore.ipynb"), str(out), "--log-level", "ERROR"],
                   check=True, env=env, capture_output=True)
    assert out.stat().st_size < 100_000
    nb = json.loads(out.read_text())
    assert "widgets" not in nb["metadata"]
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "bg03 @ 0 dB     a00 +250.0" in text and "bird 0 at 0 with delta" in text
    assert "bg01 @ 5 dB     k00 +100.0" in text and "interactive explorer" in text
    assert "== competing_speech: not run (no scores in results/scores/competing_speech/)" in text
    channel = text[text.index("== channel"):]
    assert "packet_loss_10pct     a00 +50.0" in channel and "telephone     k00 +100.0" in channel


# ------------------------------------------------------------------------------ condition families
CHANNEL = ["telephone", "packet_loss_10pct", "cut_tail_300ms"]


def fam_response(task: str, row: dict) -> str:
    """Made-up answers in the families. ASR (reference ``word N``): clean exact; a distractor at
    ≥ 0 dB adds its first word (``word N frword0``: 1 insertion, WER 0.5), below 0 dB the target's
    first word is lost as well (``bird N frword0``: WER 1.0); channel ``packet_loss_10pct`` says
    ``bird N`` (WER 0.5), the others are exact. KWS: right, except ``telephone`` (``maybe``: a flip
    for the target clip ``k00``)."""
    n, cond = int(row["speech_id"][1:]), str(row["background_id"])
    if task == "kws":
        if cond == "telephone":
            return "maybe"
        return f"{row['keyword']}." if row["keyword"] == "yes" else "unknown"
    if row["condition"] == "clean":
        return f"word {n}"
    if row["condition_family"] == "channel":
        return f"bird {n}" if cond == "packet_loss_10pct" else f"word {n}"
    head = "word" if int(row["snr_db"]) >= 0 else "bird"
    return f"{head} {n} {row['distractor_text'].split()[0]}"


def write_family_inference(fws, task: str) -> None:
    """``inference/<cf>/<model>/<task>.jsonl`` of the made-up models (:func:`fam_response`) for
    every row of the family view's manifest."""
    model = ASR_MODEL if task == "asr" else KWS_MODEL
    path = fws.inference_jsonl(model, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for r in read_manifest(fws, task).to_dict("records"):
            keep = {k: r[k] for k in ("id", "speech_id", "background_id", "snr_db", "condition", "seed")}
            f.write(json.dumps(dict(keep, raw=fam_response(task, r), model=model, task=task,
                                    prompt_id=f"{task}_baseline", decode_s=0.01, audio_s=r["duration_s"],
                                    condition_family=fws.condition_family)) + "\n")


def make_family_workspace(root, *, scored=("competing_speech", "channel")):
    """Tiny workspace (2 backgrounds) with background, competing-speech (SNR 0 and −5 dB) and channel
    (:data:`CHANNEL`) manifests for ASR and KWS, fake inference rows in each family and the family
    score files of ``scored`` (stage 8's :func:`aiplib.scoring.score.score_inference` on the family view)."""
    from test_families import add_distractors

    from aiplib.scoring.score import score_inference
    from aiplib.stimuli.family_manifests import build_family_manifest

    ws = make_tiny_workspace(root, n_bg=2)
    add_distractors(ws)
    build_manifests(ws, snrs=[10, 0])
    write_descriptors(ws)
    write_inference(ws)
    for task in ("asr", "kws"):
        build_family_manifest(ws, "competing_speech", task, snrs=[0, -5])
        build_family_manifest(ws, "channel", task, conditions=CHANNEL)
        for cf in ("competing_speech", "channel"):
            write_family_inference(ws.with_family(cf), task)
    for cf in scored:
        score_inference(ws.with_family(cf))
    return ws


@pytest.fixture
def fws(tmp_path):
    return make_family_workspace(tmp_path)


def fam_row(ws, cf, task, rid):
    m = read_manifest(ws.with_family(cf), task).set_index("id", drop=False)
    return m.loc[rid].to_dict()


def test_family_stimulus_audio_is_materialize_with_labels(fws):
    from aiplib.stimuli.families import mix_components

    comp = fws.with_family("competing_speech")
    assert xd.available_families(fws) == ["background", "competing_speech", "channel"]
    a = xd.stimulus_audio(comp, "asr", "a01", "cocktail_fr_it_ru", -5)
    row = fam_row(fws, "competing_speech", "asr", "a01_cocktail_fr_it_ru_snr-5")
    y = materialize(row, fws)[0]
    assert a["stimulus_id"] == row["id"] and a["condition_family"] == "competing_speech"
    assert np.array_equal(decode_wav(xd.wav_bytes(a["mixture"]))[0], y)       # what the model heard
    assert np.array_equal(a["clean"], materialize(fam_row(fws, "competing_speech", "asr", "a01_clean"), fws)[0])
    parts = mix_components(row, fws)
    assert np.array_equal(a["background"], parts["background"])                           # the scaled distractor
    assert achieved_snr_db(parts["speech"], a["background"]) == pytest.approx(-5.0, abs=0.1)
    lab = a["labels"]
    assert (lab["clean"], lab["mixture"]) == ("Clean target", "Mixture: target + distractor (what the model heard)")
    assert lab["background"] == "Distractor: fr+it+ru (cocktail), as mixed"
    notes = dict(lab["notes"])
    assert notes["distractor transcript"] == row["distractor_text"] and notes["same voice as the target"] == "no"
    assert notes["distractor utterances"] == row["distractor_ids"].replace("|", ", ") and notes["setting"] == "cocktail"
    es = xd.stimulus_audio(comp, "asr", "a00", "talker_es", 0)["labels"]
    assert es["background"] == "Distractor: es (single; same voice as the target), as mixed"
    assert dict(es["notes"])["same voice as the target"].startswith("yes")
    # channel: the SNR is not needed (one row per item and condition); the middle signal is the change
    ch = fws.with_family("channel")
    t = xd.stimulus_audio(ch, "kws", "k00", "telephone")
    row = fam_row(fws, "channel", "kws", "k00_ch_telephone")
    assert t["stimulus_id"] == "k00_ch_telephone"
    assert decode_wav(xd.wav_bytes(t["mixture"]))[0].tobytes() == materialize(row, fws)[0].tobytes()
    np.testing.assert_array_equal(t["background"], (t["mixture"].astype(np.float64) - t["clean"]).astype(np.float32))
    assert t["labels"]["mixture"] == "Transformed speech: telephone (what the model heard)"
    assert t["labels"]["background"] == "The transform's change (transformed − clean)"
    assert t["labels"]["notes"] == [("condition", "telephone"), ("applied to", "speech"),
                                    ("parameters", "high_hz = 3400.0, low_hz = 300.0, transform = telephone")]
    cut = xd.stimulus_audio(ch, "asr", "a00", "cut_tail_300ms")
    assert cut["background"] is None and cut["mixture"].size == cut["clean"].size - 4800   # 300 ms at 16 kHz
    assert cut["labels"]["background"].startswith("No difference signal: cut_tail_300ms changes the length")
    assert cut["mixture"].tobytes() == materialize(fam_row(fws, "channel", "asr", "a00_ch_cut_tail_300ms"), fws)[0].tobytes()
    # background: today's titles, no notes
    b = xd.stimulus_audio(fws, "asr", "a00", "bg01", 0)["labels"]
    assert (b["clean"], b["background"], b["mixture"], b["notes"]) == (*xd.PLAYER_LABELS["background"], [])


def test_family_lookup_and_worst_cases_come_from_the_family_scores(fws):
    comp, ch = fws.with_family("competing_speech"), fws.with_family("channel")
    r = xd.lookup_response(comp, ASR_MODEL, "asr", "a00_talker_it_snr-5")
    heard = fam_row(fws, "competing_speech", "asr", "a00_talker_it_snr-5")["distractor_text"].split()[0]
    assert r["source"] == "scores" and r["response"] == f"bird 0 {heard}" and heard.startswith("itword")
    assert (r["wer"], r["clean_wer"], r["delta_wer"]) == (1.0, 0.0, 1.0)
    wc = xd.worst_cases(comp, "asr", 10)
    # ties (ΔWER 1.0 at −5 dB everywhere) go by stimulus id: the cocktail first
    assert wc["condition"].tolist() == ["cocktail_fr_it_ru @ -5 dB"] * 2 and wc["delta"].tolist() == [1.0, 1.0]
    k = xd.worst_cases(ch, "kws", 10)
    assert k["condition"].tolist() == ["telephone"] and k["stimulus_id"].tolist() == ["k00_ch_telephone"]
    assert xd.worst_cases(ch, "asr", 10)["condition"].tolist() == ["packet_loss_10pct"] * 2


@pytest.mark.slow
def test_explorer_condition_family_selector(fws):
    ui = xu.explorer(fws)
    ex, c = ui.explorer, ui.explorer.controls
    # background first and default: today's explorer
    assert [o[1] for o in c["family"].options] == ["background", "competing_speech", "channel"]
    assert c["family"].value == "background" and ex.state["stimulus_id"] == "a00_bg00_snr10"
    assert c["bg"].description == "Background" and ex.bg_panel.layout.display is None
    # competing speech: the distractor's languages, voice flag and transcript; the family's scores
    c["family"].value = "competing_speech"
    assert ex.ws.condition_family == "competing_speech" and c["bg"].description == "Distractor"
    assert ex.state["stimulus_id"] == "a00_talker_fr_snr0"      # bg00 is not a distractor: the first one, at 0 dB
    assert ("talker_es (es, same voice)", "talker_es") in c["bg"].options
    assert [o[1] for o in c["snr"].options] == [0.0, -5.0] and ex.bg_panel.layout.display == "none"
    ex.select(item_id="a01", bg_id="talker_ru", snr_db=-5)
    row = fam_row(fws, "competing_speech", "asr", "a01_talker_ru_snr-5")
    assert ex.state["stimulus_id"] == row["id"]
    assert decode_wav(ex.players["mixture"].value)[0].tobytes() == materialize(row, fws)[0].tobytes()
    assert ex.player_titles["background"].value == "<b>Distractor: ru (single), as mixed</b>"
    assert html_escape(row["distractor_text"]) in ex.family_info.value
    heard = row["distractor_text"].split()[0]                    # the made-up model repeats the distractor's first word
    assert text_of(ex.response.value, "aip-response-text") == f"bird 1 {heard}"
    assert "ΔWER vs clean <b>+100.0 pp</b>" in ex.metrics.value and ex.state["result"]["source"] == "scores"
    assert [b.description for b in ex.worst_buttons] == ["cocktail_fr_it_ru @ -5 dB"] * 2
    # channel: no SNR chooser; a worst case switches nothing but the stimulus
    ex.select(condition_family="channel", task="kws", item_id="k00", bg_id="telephone")
    assert c["snr"].layout.display == "none" and c["bg"].description == "Channel"
    assert ex.state["stimulus_id"] == "k00_ch_telephone" and "flip: correct → wrong" in ex.metrics.value
    assert ex.player_titles["mixture"].value == "<b>Transformed speech: telephone (what the model heard)</b>"
    assert "transform = telephone" in ex.family_info.value and "no noise added" in ex.mixinfo.value
    assert [b.description for b in ex.worst_buttons] == ["telephone"]
    ex.select(bg_id="cut_tail_300ms")
    assert ex.players["background"].value == b"" and ex.players["background"].layout.display == "none"
    assert ex.player_boxes["background"].layout.display is None          # its title says why
    # back to background: the battery's labels and table again
    ex.select(condition_family="background", task="asr", item_id="a00", bg_id="bg01", snr_db=0)
    assert ex.player_titles["clean"].value == "<b>Clean utterance</b>" and ex.family_info.value == ""
    assert c["snr"].layout.display is None and ex.bg_panel.layout.display is None
    with pytest.raises(AiplibParameterError, match="no manifests here"):
        ex.select(condition_family="reverb")


def test_explorer_offers_only_families_with_manifests(ws0):
    ex = xu.explorer(ws0).explorer
    assert ex.families == ["background"] and ex.controls["family"].disabled
    assert ex.controls["snr"].layout.display is None


def html_escape(s: str) -> str:
    import html

    return html.escape(s)
