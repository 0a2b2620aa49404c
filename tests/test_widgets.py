"""aiplib.widgets: the helpers behind notebook 10's explorer, checked on real values.

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

from aiplib import widgets as aw
from aiplib.descriptors import DESCRIPTORS
from aiplib.errors import AiplibParameterError
from aiplib.manifests import build_manifests, read_manifest
from aiplib.mixing import achieved_snr_db, materialize
from conftest import make_tiny_workspace

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


def row_of(ws, fam, item, bg, snr=None):
    m = read_manifest(ws, fam)
    sel = m[(m["speech_id"] == item) & (m["background_id"] == bg)]
    if bg != "clean":
        sel = sel[sel["snr_db"] == int(snr)]
    assert len(sel) == 1
    return sel.iloc[0].to_dict()


# ------------------------------------------------------------------------------------------- audio
def test_stimulus_audio_is_materialize_sample_for_sample(ws0):
    a = aw.stimulus_audio(ws0, "asr", "a01", "bg07", 5)
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
    a = aw.stimulus_audio(ws0, "kws", "k00", "clean")
    assert a["background"] is None
    assert a["stimulus_id"] == "k00_clean"
    assert np.array_equal(a["mixture"], materialize(row_of(ws0, "kws", "k00", "clean"), ws0)[0])


def test_stimulus_audio_unknown_stimulus_lists_valid_values(ws0):
    with pytest.raises(AiplibParameterError, match="backgrounds: bg00, bg01"):
        aw.stimulus_audio(ws0, "asr", "a00", "nope", 5)
    with pytest.raises(AiplibParameterError, match="SNRs"):
        aw.stimulus_audio(ws0, "asr", "a00", "bg00", 7)


def test_wav_bytes_float32_roundtrip_is_exact_and_pcm16_quantises(ws0):
    y = aw.stimulus_audio(ws0, "asr", "a00", "bg02", 0)["mixture"]
    data = aw.wav_bytes(y)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    back, sr = aw.decode_wav(data)
    assert sr == 16000 and back.dtype == np.float32
    assert np.array_equal(back, y)
    assert len(data) == 58 + 4 * y.shape[0]
    assert aw.wav_bytes(y.copy()) == data  # deterministic: no time stamp in the file
    # 16-bit PCM, for comparison: off by up to one step of 1/32768 (written ×32767, read ÷32768)
    # — the loss a float WAV avoids
    d16 = aw.wav_bytes(y, subtype="PCM_16")
    assert len(d16) == 44 + 2 * y.shape[0]
    back16, _ = aw.decode_wav(d16)
    assert not np.array_equal(back16, y)
    assert np.max(np.abs(back16 - y)) <= 1 / 32768
    with pytest.raises(AiplibParameterError):
        aw.wav_bytes(np.array([0.0, np.nan], dtype=np.float32))


def test_log_mel_shape_and_range():
    t = np.arange(16000) / 16000
    y = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    S = aw.log_mel(y)
    assert S.shape == (64, 1 + 16000 // 160)
    assert S.max() == pytest.approx(0.0) and S.min() >= -80.0 - 1e-3
    # the 1 kHz tone's energy sits in the band around 1 kHz
    import librosa

    centres = librosa.mel_frequencies(n_mels=66, fmin=0, fmax=8000)[1:-1]
    peak_band = int(np.argmax(S[:, 50]))
    assert abs(centres[peak_band] - 1000) < 120
    png = aw.mixture_figure_png(y, title="tone")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# ------------------------------------------------------------------------------- results lookups
def test_available_tasks_and_models(ws0, tmp_path):
    assert aw.available_tasks(ws0) == ["asr", "kws"]
    assert aw.available_models(ws0, "asr") == []
    write_inference(ws0)
    assert aw.available_models(ws0, "asr") == [ASR_MODEL]
    assert aw.available_models(ws0, "kws") == [KWS_MODEL]


def test_lookup_response_from_inference_scores_it_here(ws1):
    r = aw.lookup_response(ws1, ASR_MODEL, "asr", "a01_bg03_snr0")
    assert r["found"] and r["source"] == "inference"
    assert r["reference"] == "word 1"
    assert r["response"] == "bird 1 at 0 with delta"
    assert r["clean_response"] == "word 1"
    assert r["wer"] == pytest.approx(2.5)  # S=1, I=4, N=2
    assert r["clean_wer"] == 0.0
    assert r["delta_wer"] == pytest.approx(2.5)
    r = aw.lookup_response(ws1, ASR_MODEL, "asr", "a00_bg05_snr10")
    assert r["response"] == "word 0 at 10 with foxtrot" and r["wer"] == pytest.approx(2.0)
    # KWS: target "yes" flips on bg01 at 5 dB; the non-target "cat" stays correct
    k = aw.lookup_response(ws1, KWS_MODEL, "kws", "k00_bg01_snr5")
    assert (k["first_word"], k["correct"], k["clean_correct"], k["delta_acc"]) == ("maybe", False, True, 1.0)
    k = aw.lookup_response(ws1, KWS_MODEL, "kws", "k01_bg01_snr5")
    assert (k["correct"], k["clean_correct"], k["delta_acc"]) == (True, True, 0.0)


def test_lookup_response_missing_row_and_unknown_stimulus(tmp_path):
    ws = make_tiny_workspace(tmp_path)
    build_manifests(ws)
    write_inference(ws, skip={"a00_bg00_snr10"})
    r = aw.lookup_response(ws, ASR_MODEL, "asr", "a00_bg00_snr10")
    assert not r["found"] and r["response"] is None and math.isnan(r["delta_wer"])
    with pytest.raises(AiplibParameterError, match="not in manifests/asr.csv"):
        aw.lookup_response(ws, ASR_MODEL, "asr", "zz_bg00_snr10")


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
    assert aw.worst_cases(ws0, "asr").empty
    assert list(aw.worst_cases(ws0, "asr").columns) == aw.WORST_COLUMNS
    write_scores(ws0)
    wc = aw.worst_cases(ws0, "asr", n=4)
    assert list(wc.columns) == aw.WORST_COLUMNS
    # 0.9 twice: the higher SNR (5 dB) first; then 0.5, 0.3
    assert wc["stimulus_id"].tolist() == ["a00_bg04_snr5", "a00_bg02_snr0",
                                          "a00_bg00_snr10", "a01_bg00_snr10"]
    assert wc["delta"].tolist() == [0.9, 0.9, 0.5, 0.3]
    assert len(aw.worst_cases(ws0, "asr", n=10)) == 5  # the negative ΔWER is not a "worst case"
    k = aw.worst_cases(ws0, "kws")
    assert k["stimulus_id"].tolist() == ["k00_bg01_snr10", "k00_bg01_snr0"]
    assert k["reference"].tolist() == ["yes", "yes"] and k["response"].tolist() == ["go", "no"]
    with pytest.raises(AiplibParameterError):
        aw.worst_cases(ws0, "asr", n=0)


def test_lookup_response_prefers_the_score_file(ws0):
    write_scores(ws0)
    r = aw.lookup_response(ws0, "m1", "asr", "a00_bg02_snr0")
    assert r["source"] == "scores" and r["response"] == "resp a00 bg02"
    assert (r["wer"], r["clean_wer"], r["delta_wer"]) == (0.9, 0.0, 0.9)
    assert r["clean_response"] == "clean says"
    k = aw.lookup_response(ws0, "m2", "kws", "k00_bg01_snr0")
    assert (k["first_word"], k["correct"], k["clean_correct"], k["delta_acc"]) == ("no", False, True, 1.0)


def test_lookup_matches_real_scoring_of_the_same_rows(ws1):
    """The inference fallback gives the same WER / ΔWER as stage 8's score files."""
    from aiplib.scoring import score_inference

    direct = [aw.lookup_response(ws1, ASR_MODEL, "asr", s) for s in
              ("a01_bg03_snr0", "a00_bg05_snr10", "a00_clean")]
    score_inference(ws1)
    for d in direct:
        s = aw.lookup_response(ws1, ASR_MODEL, "asr", d["stimulus_id"])
        assert s["source"] == "scores" and d["source"] == "inference"
        assert s["response"] == d["response"]
        assert s["wer"] == pytest.approx(d["wer"])
        assert (math.isnan(s["delta_wer"]) and math.isnan(d["delta_wer"])) or s["delta_wer"] == pytest.approx(
            d["delta_wer"])
    kd = aw.lookup_response(ws1, KWS_MODEL, "kws", "k00_bg01_snr0")
    assert kd["delta_acc"] == 1.0 and kd["source"] == "scores"
    assert aw.worst_cases(ws1, "kws")["stimulus_id"].tolist() == ["k00_bg01_snr5", "k00_bg01_snr0"]


def test_background_table_values_and_order(ws0):
    t = aw.background_table(ws0)
    assert len(t) == 20 and t.index[0] == "bg00"  # no scores: battery order
    assert t.loc["bg03", "licence"] == "CC0" and t.loc["bg03", "source_package"] == "test"
    assert [t.loc["bg03", d] for d in DESCRIPTORS] == pytest.approx([3 + k / 10 for k in range(9)])
    write_scores(ws0)
    t = aw.background_table(ws0)
    # asr means over items/SNRs: bg02 (0.9+0.1)/2 = 0.5, bg04 0.9, bg00 0.4, bg05 -0.2
    assert t["asr_delta_wer"].dropna().to_dict() == pytest.approx({"bg04": 0.9, "bg02": 0.5, "bg00": 0.4,
                                                                   "bg05": -0.2})
    assert t.index[:4].tolist() == ["bg04", "bg02", "bg00", "bg05"]
    assert t.loc["bg01", "kws_delta_acc"] == 1.0 and t.loc["bg02", "kws_delta_acc"] == 0.0


# ---------------------------------------------------------------------------------------- widget
def test_explorer_before_inference_plays_mixtures_and_says_so(ws0):
    ui = aw.explorer(ws0)
    ex = ui.explorer
    assert "aip-explorer" in ui._dom_classes
    assert ex.controls["model"].disabled
    assert ex.state["message"].startswith("no inference results yet for asr")
    assert "no inference results yet for asr" in ex.status.value
    ex.select(item_id="a01", bg_id="bg07", snr_db=0)
    y, _ = materialize(row_of(ws0, "asr", "a01", "bg07", 0), ws0)
    assert ex.players["mixture"].value == aw.wav_bytes(y)
    assert np.array_equal(aw.decode_wav(ex.players["mixture"].value)[0], y)
    assert "aip-no-response" in ex.response.value
    assert ex.plot.value[:4] == b"\x89PNG"
    # a static representation that does not spell out the audio bytes
    bundle = ui._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "a01_bg07_snr0" in bundle["text/html"] and len(bundle["text/plain"]) < 200
    assert "a01_bg07_snr0" in repr(ui)


def test_explorer_changes_follow_the_controls(ws1):
    ui = aw.explorer(ws1)
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
    assert ex.players["mixture"].value == aw.wav_bytes(y) != before
    assert np.array_equal(aw.decode_wav(ex.players["clean"].value)[0],
                          materialize(row_of(ws1, "asr", "a00", "clean"), ws1)[0])
    assert "<span class='aip-response-text'>bird 0 at 0 with delta</span>" in ex.response.value
    assert "<b>+2.500</b>" in ex.response.value  # ΔWER vs clean
    assert ex.state["result"]["delta_wer"] == pytest.approx(2.5)
    # the background panel shows the chosen background's descriptors and licence
    assert "CC0" in ex.bg_info.value and "spectral_centroid" in ex.bg_info.value
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
    assert "flip: correct → wrong" in ex.response.value


def test_explorer_worst_case_button_loads_the_stimulus(ws1):
    from aiplib.scoring import score_inference

    score_inference(ws1)
    ui = aw.explorer(ws1)
    ex = ui.explorer
    buttons = ex.worst.children
    # ASR: every noisy row has ΔWER 2; the largest (2.5) are bg03 at 0 dB, a00 before a01
    assert len(buttons) == 10
    assert buttons[0].description.startswith("ΔWER +2.50 · fake_asr · a00 · bg03 @ 0 dB")
    buttons[1].click()
    assert ex.state["stimulus_id"] == "a01_bg03_snr0"
    assert (ex.controls["item"].value, ex.controls["bg"].value, ex.controls["snr"].value) == ("a01", "bg03", 0.0)
    assert ex.state["result"]["source"] == "scores"
    assert ex.players["mixture"].value == aw.wav_bytes(
        materialize(row_of(ws1, "asr", "a01", "bg03", 0), ws1)[0])
    # the sortable table: ranked by mean ΔWER, bg03 first; sorting by a descriptor reorders it
    assert ex.bg_table.value.index("data-bg='bg03'") < ex.bg_table.value.index("data-bg='bg00'")
    ex.bg_sort.value = "zcr"
    ex.bg_ascending.value = True
    assert ex.bg_table.value.index("data-bg='bg00'") < ex.bg_table.value.index("data-bg='bg03'")
    ex.controls["task"].value = "kws"
    kb = ex.worst.children
    assert [b.description for b in kb] == ["flip · fake_kws · k00 · bg01 @ 5 dB",
                                           "flip · fake_kws · k00 · bg01 @ 0 dB"]


def test_explorer_without_manifests_says_what_to_run(tmp_path):
    from aiplib.workspace import workspace

    ui = aw.explorer(workspace("demo", data_root=tmp_path))
    assert "run notebooks 01–05 first" in ui.explorer.status.value
    assert ui.explorer.controls["task"].disabled
