"""Tests of aiplib.scoring: normaliser, WER, KWS rule and score files (known values)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aiplib import scoring
from aiplib.scoring import (kws_correct, kws_first_word, normalize_text, score_inference, wer,
                            wer_details)
from aiplib.workspace import workspace


# ------------------------------------------------------------------------------ normalisation
def test_normaliser_recorded():
    assert scoring.NORMALIZER_NAME.startswith("whisper_normalizer.english")
    assert scoring.NORMALIZER_VERSION and scoring.JIWER_VERSION


def test_whisper_normaliser_titles_numbers_possessive():
    # Whisper's normaliser spells out "Mr.", turns number words into digits and "'s" into "is".
    assert normalize_text("Mr. Smith's 2 cats") == "mister smith is 2 cats"
    assert normalize_text("mister smith's two cats") == "mister smith is 2 cats"
    assert wer("Mr. Smith's 2 cats", "mister smith's two cats") == 0.0


def test_typographic_apostrophes_mapped():
    assert normalize_text("don\u2019t") == normalize_text("don't") == "do not"
    assert normalize_text("don\u2018t") == "do not"
    assert normalize_text("don\u02bct") == "do not"


def test_normaliser_punctuation_case_fillers_none():
    assert normalize_text("The cat, sat!") == "the cat sat"
    assert normalize_text("uh the cat um") == "the cat"
    assert normalize_text(None) == ""
    assert normalize_text(float("nan")) == ""


# ------------------------------------------------------------------------------------ WER
def test_wer_insertion():
    assert wer("the cat sat", "the cat sat down") == pytest.approx(1 / 3)


def test_wer_sdi_counts():
    d = wer_details(["a b c"], ["a x c d"])
    assert (d["substitutions"], d["deletions"], d["insertions"], d["hits"]) == (1, 0, 1, 2)
    assert d["wer"] == pytest.approx(2 / 3)
    assert d["errors"] == 2 and d["ref_words"] == 3


def test_wer_empty_hypothesis_is_all_deletions():
    d = wer_details(["a b"], [""])
    assert d["deletions"] == 2 and d["wer"] == 1.0


def test_corpus_vs_mean_wer_differ():
    # utterance 1: 0 errors / 4 words; utterance 2: 2 errors (1 S + 1 I) / 1 word
    d = wer_details(["a b c d", "e"], ["a b c d", "f g"])
    assert d["wer"] == pytest.approx(2 / 5)        # pooled: Σ errors / Σ words
    assert d["mean_wer"] == pytest.approx(1.0)     # (0/4 + 2/1) / 2
    assert d["per_utterance"] == pytest.approx([0.0, 2.0])
    assert d["cer"] >= 0


def test_empty_reference_raises():
    with pytest.raises(ValueError, match="empty after normalisation"):
        wer("uh", "hello")
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        wer_details(["a", "b"], ["a"])


# ------------------------------------------------------------------------------------ KWS
@pytest.mark.parametrize("response, first", [
    ("Yes.", "yes"), ("**yes**", "yes"), ("Yes, it is.", "yes"), ("Yesterday", "yesterday"),
    ("- `Go`", "go"), ('"No"', "no"), ("[stop]", "stop"), ("*Off*!", "off"),
    ("\u201cLeft\u201d", "left"), ("", ""), ("  ** ", ""), (None, ""),
])
def test_kws_first_word(response, first):
    assert kws_first_word(response) == first


def test_kws_correct_rule():
    assert kws_correct("Yes.", "yes", True)
    assert kws_correct("**yes**", "yes", True)
    assert kws_correct("Yes, it is.", "yes", True)
    assert not kws_correct("Yesterday", "yes", True)
    assert not kws_correct("no", "yes", True)
    # non-target clips: any answer that is not one of the ten keywords is correct
    assert kws_correct("unknown", "cat", False)
    assert kws_correct("Yesterday", "bed", False)
    assert not kws_correct("Yes.", "bed", False)
    assert not kws_correct("off", "bed", False)


# ----------------------------------------------------------------------- score_inference
def _write_jsonl(path, rows, tail=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")


def _row(sid, item, bg, snr, task, model, response):
    """A row in the authors' format (manifest columns left to the manifest; id, raw, model, task)."""
    if response == "__ERROR__":
        return {"id": sid, "raw": response, "error": "boom", "model": model, "task": task}
    return {"id": sid, "speech_id": item, "background_id": bg, "snr_db": 99 if snr is None else snr,
            "raw": response, "model": model, "task": task, "prompt_id": "p0", "decode_s": 0.1, "audio_s": 1.0}


def _sid(fam, item, bg, snr):
    return f"{item}_clean" if snr is None else f"{item}_{bg}_snr{snr}"


def _mrow(fam, item, bg, snr, seed):
    clean = snr is None
    return {"id": _sid(fam, item, bg, snr), "speech_id": item, "background_id": bg,
            "snr_db": 99 if clean else snr, "condition": "clean" if clean else "noisy", "seed": seed,
            "speech_path": f"{item}.wav", "bg_path": "" if clean else f"bg/{bg}.wav"}


@pytest.fixture()
def tiny_ws(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    asr_rows, kws_rows = [], []
    refs = {"0001": "the cat sat", "0002": "Mr. Smith's 2 cats"}
    for item, ref in refs.items():
        for bg, snr in [("clean", None), ("babble", 10), ("babble", 0)]:
            asr_rows.append({**_mrow("asr", item, bg, snr, len(asr_rows)), "accent": "en-gb", "gender": "",
                             "transcript": ref})
    labels = {"k1": ("yes", True), "k2": ("bed", False)}
    for item, (lab, tgt) in labels.items():
        for bg, snr in [("clean", None), ("babble", 0)]:
            kws_rows.append({**_mrow("kws", item, bg, snr, 10000 + len(kws_rows)), "keyword": lab,
                             "is_target": tgt})
    pd.DataFrame(asr_rows).to_csv(ws.manifests / "asr.csv", index=False)
    pd.DataFrame(kws_rows).to_csv(ws.manifests / "kws.csv", index=False)
    resp = {
        ("0001", "clean"): "The cat sat.",               # 0
        ("0001", "babble", 10): "the cat sat down",      # 1/3
        ("0001", "babble", 0): "__ERROR__",              # dropped
        ("0002", "clean"): "Mister Smith’s two cats",    # 0 (typographic apostrophe)
        ("0002", "babble", 10): "mister smith is cats",  # 1 deletion / 5 words
        ("0002", "babble", 0): "",                       # 5 deletions / 5 words
    }
    rows = []
    for key, r in resp.items():
        item, bg = key[0], key[1]
        snr = key[2] if len(key) == 3 else None
        rows.append(_row(_sid("asr", item, bg, snr), item, bg, snr, "asr", "m1", r))
    # the run was interrupted while writing the last line
    _write_jsonl(ws.inference / "m1" / "asr.jsonl", rows, tail='{"id": "0001_bab')
    krows = [
        _row(_sid("kws", "k1", "clean", None), "k1", "clean", None, "kws", "m1", "**Yes**"),
        _row(_sid("kws", "k1", "babble", 0), "k1", "babble", 0, "kws", "m1", "Yesterday"),
        _row(_sid("kws", "k2", "clean", None), "k2", "clean", None, "kws", "m1", "yes"),
        _row(_sid("kws", "k2", "babble", 0), "k2", "babble", 0, "kws", "m1", "unknown"),
    ]
    _write_jsonl(ws.inference / "m1" / "kws.jsonl", krows)
    _write_jsonl(ws.inference / "m1" / "run_log.jsonl", [{"run": 1}])
    return ws


def test_score_inference_asr(tiny_ws):
    out = score_inference(tiny_ws)
    assert set(out) == {"asr", "kws"}
    asr = out["asr"].set_index("stimulus_id")
    assert len(asr) == 5                                  # 6 rows − 1 __ERROR__
    assert asr.loc[_sid("asr", "0001", "clean", None), "wer"] == 0
    assert asr.loc[_sid("asr", "0001", "babble", 10), "delta_wer"] == pytest.approx(1 / 3)
    assert asr.loc[_sid("asr", "0002", "clean", None), "wer"] == 0
    assert asr.loc[_sid("asr", "0002", "babble", 10), "delta_wer"] == pytest.approx(1 / 5)
    assert asr.loc[_sid("asr", "0002", "babble", 0), "delta_wer"] == pytest.approx(1.0)
    assert asr.loc[_sid("asr", "0002", "babble", 0), "deletions"] == 5
    assert np.isnan(asr.loc[_sid("asr", "0001", "clean", None), "delta_wer"])
    assert asr.loc[_sid("asr", "0002", "babble", 10), "snr_db"] == 10
    assert asr.loc[_sid("asr", "0002", "babble", 10), "accent_group"] == "en-gb"
    assert asr.loc[_sid("asr", "0001", "babble", 10), "item_id"] == "0001"   # not 1
    for c in ("model", "task", "reference", "response", "ref_norm", "hyp_norm", "wer", "errors",
              "ref_words", "delta_wer"):
        assert c in asr.columns
    side = json.loads((tiny_ws.results / "scores" / "asr.json").read_text())
    assert side["n_errors"] == {"m1": 1}
    assert side["n_malformed_lines"] == {"m1": 1}
    assert side["n_rows"] == 5
    assert side["normalizer"]["version"] == scoring.NORMALIZER_VERSION
    assert side["jiwer_version"] == scoring.JIWER_VERSION
    back = pd.read_csv(tiny_ws.results / "scores" / "asr.csv")
    assert len(back) == 5


def test_score_inference_kws(tiny_ws):
    kws = score_inference(tiny_ws, tasks=["kws"])["kws"].set_index("stimulus_id")
    assert kws.loc[_sid("kws", "k1", "clean", None), "first_word"] == "yes"
    assert kws.loc[_sid("kws", "k1", "clean", None), "correct"] == 1
    assert kws.loc[_sid("kws", "k1", "babble", 0), "correct"] == 0
    assert kws.loc[_sid("kws", "k1", "babble", 0), "delta_acc"] == 1      # 1 − 0
    assert kws.loc[_sid("kws", "k2", "clean", None), "correct"] == 0      # keyword on non-target
    assert kws.loc[_sid("kws", "k2", "babble", 0), "delta_acc"] == -1     # 0 − 1
    assert bool(kws.loc[_sid("kws", "k1", "clean", None), "is_target"]) is True
    side = json.loads((tiny_ws.results / "scores" / "kws.json").read_text())
    assert side["n_errors"] == {"m1": 0} and side["keywords"][0] == "yes"


def test_score_inference_keeps_last_success_on_rerun(tiny_ws):
    p = tiny_ws.inference / "m1" / "kws.jsonl"
    sid = _sid("kws", "k1", "babble", 0)
    with p.open("a", encoding="utf-8") as f:   # a resumed run retried the stimulus
        f.write(json.dumps(_row(sid, "k1", "babble", 0, "kws", "m1", "__ERROR__")) + "\n")
        f.write(json.dumps(_row(sid, "k1", "babble", 0, "kws", "m1", "yes")) + "\n")
    kws = score_inference(tiny_ws, tasks=["kws"])["kws"].set_index("stimulus_id")
    assert len(kws) == 4 and kws.loc[sid, "correct"] == 1
    side = json.loads((tiny_ws.results / "scores" / "kws.json").read_text())
    assert side["n_errors"] == {"m1": 0} and side["n_duplicates"] == {"m1": 2}


def test_score_inference_no_files(tmp_path):
    from aiplib.errors import AiplibError

    with pytest.raises(AiplibError, match="no inference files"):
        score_inference(workspace("demo", data_root=tmp_path))
