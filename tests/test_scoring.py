"""Tests of aiplib.scoring.score: normaliser, WER, KWS rule and score files (known values)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aiplib.core import textnorm
from aiplib.core.textnorm import (
    kws_correct,
    kws_first_word,
    kws_non_answer,
    normalize_kws_label,
    normalize_text,
    normalize_whisper,
    reference_is_empty,
    score_asr_row,
    score_kws_row,
)
from aiplib.core.workspace import workspace
from aiplib.scoring import score as scoring
from aiplib.scoring.score import score_inference, wer, wer_details


# ------------------------------------------------------------------------------ normalisation
def test_normalisers_recorded():
    assert textnorm.NORMALIZER_NAME == "aip-speech-paper" and textnorm.NORMALIZER_VERSION == "2"
    assert textnorm.WHISPER_NORMALIZER_NAME.startswith(
        "openai-whisper whisper.normalizers.EnglishTextNormalizer")
    assert textnorm.WHISPER_NORMALIZER_VERSION == "20250625+pr2836"
    prov = scoring.normalizer_provenance()
    assert prov["normalizer_whisper"]["version"] == textnorm.WHISPER_NORMALIZER_VERSION
    assert prov["jiwer_version"] == textnorm.JIWER_VERSION


def test_paper_normalisation():
    # the authors' rule: lower-case, ASCII punctuation -> space, white space collapsed
    assert normalize_text("Mr. Smith's  2 cats!") == "mr smith s 2 cats"
    assert normalize_text("The cat, sat!") == "the cat sat"
    assert normalize_text("uh the cat um") == "uh the cat um"          # fillers kept
    assert normalize_text("don\u2019t") == "don\u2019t"                  # not ASCII punctuation
    assert normalize_text("well-known (x)") == "well known x"
    assert normalize_text(None) == "" and normalize_text(float("nan")) == ""


def test_whisper_normaliser_is_openais():
    assert normalize_whisper("Mr. Smith's 2 cats") == "mister smith is 2 cats"
    assert normalize_whisper("mister smith's two cats") == "mister smith is 2 cats"
    assert normalize_whisper("uh the cat um") == "the cat"
    assert normalize_whisper("colour") == "color"
    # whisper_normalizer 0.1.15 adds rules of its own; OpenAI's normaliser has none of them
    assert normalize_whisper("the cause of it") == "the cause of it"
    assert normalize_whisper("I dunno, kinda") == "i dunno kinda"
    assert normalize_whisper("don\u2019t") == "don t"                     # no apostrophe mapping
    assert wer("Mr. Smith's 2 cats", "mister smith's two cats", normalizer="whisper") == 0.0


@pytest.mark.parametrize("text, expected", [
    # openai/whisper#2836 (merged upstream after the 20250625 release): only a standalone 1
    ("it costs one dollar", "it costs $1"), ("it costs one", "it costs one"),
    ("three point one", "3.1"), ("one point five", "1.5"), ("one percent", "1%"),
    ("minus one", "-1"), ("1", "one"), ("1s and 1", "ones and one"),
    ("one dollar and twenty cents", "$1.20"), ("PyTorch 1.10.1", "pytorch 1.10.1"),
])
def test_whisper_upstream_standalone_one_fix(text, expected):
    assert normalize_whisper(text) == expected


def test_one_dollar_is_not_one():
    assert wer("it costs one dollar", "it costs one", normalizer="whisper") == pytest.approx(1 / 3)
    assert wer("it costs one dollar", "it costs one") == pytest.approx(1 / 4)


_SENTENCES = [
    "Mr. Smith's 2 cats", "He said, \"I'd been there\" (twice) [music] uh", "the colour grey",
    "twenty-five percent of ten thousand dollars", "Dr. Jones won't go; she's gone!",
    "It's 3:30 p.m. on the 2nd of May", "half a million and a half", "double five oh seven",
    "Caf\u00e9 na\u00efve co\u00f6perate", "don\u2019t stop", "the cause of it",
    "I dunno, kinda sorta", "nineteen eighty four", "$20 and ¢7", "one", "it costs two dollars",
]


def test_whisper_normaliser_equals_openai_release_except_upstream_fix():
    # The installed package's own normaliser (imports torch): identical output on sentences
    # without a digit 1 next to a symbol; our private copy leaves the package untouched.
    english = pytest.importorskip("whisper.normalizers.english")
    release = english.EnglishTextNormalizer()
    for text in _SENTENCES:
        assert normalize_whisper(text) == release(text).strip(), text
    assert release("it costs one dollar").strip() == "it costs one"      # the release's bug
    assert normalize_whisper("it costs one dollar") == "it costs $1"     # upstream #2836
    assert release("it costs one dollar").strip() == "it costs one"      # still untouched


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


def test_paper_wer_differs_from_whisper_wer():
    r = score_asr_row("Mr. Smith's 2 cats", "Mister Smith\u2019s two cats")
    # paper: [mr smith s 2 cats] vs [mister smith’s two cats] -> 3 S + 1 D over 5 words
    assert (r["substitutions"], r["deletions"], r["insertions"]) == (3, 1, 0)
    assert r["wer"] == pytest.approx(4 / 5)
    # Whisper: "mister smith is 2 cats" vs "mister smith s 2 cats" -> 1 S over 5
    assert r["wer_whisper"] == pytest.approx(1 / 5)
    assert (r["errors_whisper"], r["ref_words_whisper"]) == (1, 5)


def test_empty_reference_convention():
    both = score_asr_row("", "")
    assert (both["errors"], both["ref_words"], both["ref_empty"]) == (0, 0, True)
    assert np.isnan(both["wer"])
    ins = score_asr_row("", "x y")
    assert (ins["insertions"], ins["errors"], ins["ref_words"]) == (2, 2, 0)
    assert ins["ref_empty"] and np.isnan(ins["wer"])
    dele = score_asr_row("a b", "")
    assert (dele["deletions"], dele["wer"], dele["ref_empty"]) == (2, 1.0, False)
    # corpus view: the insertions of the empty reference count, its per-utterance WER not
    d = wer_details(["", "", "a b"], ["", "x y", ""])
    assert (d["errors"], d["ref_words"], d["n_ref_empty"]) == (4, 2, 2)
    assert d["wer"] == pytest.approx(2.0)
    assert d["mean_wer"] == 1.0
    assert np.isnan(d["per_utterance"][0]) and np.isnan(d["per_utterance"][1])
    assert np.isnan(wer("...", "hello"))
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        wer_details(["a", "b"], ["a"])


def test_whisper_empty_reference_only():
    r = score_asr_row("uh", "hello")           # "uh" is a word for the paper, a filler for Whisper
    assert r["wer"] == 1.0 and not r["ref_empty"]
    assert np.isnan(r["wer_whisper"]) and r["errors_whisper"] == 1


@pytest.mark.parametrize("text, empty", [
    ("", True), ("   ", True), ("...", True), ("uh", True), ("[music]", True),
    ("(laughs) um", True), (None, True), ("the cat", False), ("Yes!", False),
])
def test_reference_is_empty(text, empty):
    assert reference_is_empty(text) is empty


def test_scoring_failure_counts_one(monkeypatch):
    def boom(*a):
        raise RuntimeError("alignment failed")

    monkeypatch.setattr(textnorm, "align", boom)
    with pytest.raises(RuntimeError):      # the Whisper-style column has no failure rule
        score_asr_row("a b c", "a b")
    calls = []

    def first_fails(r, h):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("alignment failed")
        return 0, 0, 0, len(r.split())

    monkeypatch.setattr(textnorm, "align", first_fails)
    r = score_asr_row("a b c", "a b")
    assert r["score_failed"] and r["wer"] == 1.0
    assert (r["deletions"], r["errors"], r["ref_words"]) == (3, 3, 3)


# ---------------------------------------------------------------------------------- loops
def test_max_ngram_repeats():
    assert textnorm.max_ngram_repeats("left and left and left and left and".split()) == (4, 2)
    assert textnorm.max_ngram_repeats("a b c".split()) == (1, 1)
    assert textnorm.max_ngram_repeats([]) == (0, 0)
    assert textnorm.max_ngram_repeats("x a b c a b c a b c a b c y".split()) == (4, 3)
    assert textnorm.max_ngram_repeats("a b c d e a b c d e".split()) == (1, 1)   # n = 5 > 4


def test_loops():
    # "turn left" recognised as a looping "left and left and ...": 12 words >= 3 x 2
    r = score_asr_row("Turn left.", "left and left and left and left and left and left and")
    assert r["is_loop"] and r["loop_kind"] == "length" and r["hyp_words"] == 12
    assert r["wer"] == pytest.approx(11 / 2)
    ref = "the quick brown fox jumps over the lazy dog near the river bank"
    hyp = "the quick brown fox jumps left and left and left and left and"
    r = score_asr_row(ref, hyp)
    assert r["is_loop"] and r["loop_kind"] == "ngram"
    three = score_asr_row(ref, "the quick brown fox left and left and left and")   # 3 repeats
    assert not three["is_loop"] and three["loop_kind"] == ""
    # a reference that repeats itself is not a loop when recognised faithfully
    faithful = score_asr_row("no no no no I said", "no no no no i said")
    assert not faithful["is_loop"]
    assert score_asr_row("no", "no no no no")["loop_kind"] == "length"
    assert not score_asr_row("", "x y")["is_loop"]                # no length rule without a ref


# ------------------------------------------------------------------------------------ KWS
@pytest.mark.parametrize("response, first", [
    ("Yes.", "yes"), ("**yes**", "yes"), ("Yes, it is.", "yes"), ("Yesterday", "yesterday"),
    ("- `Go`", ""), ('"No"', "no"), ("[stop]", "stop"), ("*Off*!", "off"),
    ("\u201cLeft\u201d", "\u201cleft\u201d"), ("", "silence"), ("   ", "silence"),
    ("  ** ", ""), (None, "silence"), ("SILENCE", "silence"),
])
def test_kws_first_word(response, first):
    # the authors' rule: first token of the lower-cased stripped response, ASCII punctuation
    # stripped at both ends; "silence" for an empty response
    assert kws_first_word(response) == first


def test_kws_correct_rule():
    assert kws_correct("Yes.", "yes", True)
    assert kws_correct("**yes**", "yes", True)
    assert kws_correct("Yes, it is.", "yes", True)
    assert not kws_correct("Yesterday", "yes", True)
    assert not kws_correct("no", "yes", True)
    assert not kws_correct("", "yes", True)
    assert kws_correct("Yes", "Yes!", True)                # label normalised like responses
    # non-target clips: any answer that is not one of the ten keywords is correct
    assert kws_correct("unknown", "cat", False)
    assert kws_correct("Yesterday", "bed", False)
    assert kws_correct("", "bed", False)                   # empty reads as "silence"
    assert kws_correct("The word is yes.", "bed", False)   # first word "the"
    assert not kws_correct("Yes.", "bed", False)
    assert not kws_correct("off", "bed", False)


@pytest.mark.parametrize("label, norm", [
    ("Yes!", "yes"), (" YES ", "yes"), ("'Left'", "left"), ("go.", "go"), ("bed", "bed"),
    ("...", ""), (None, ""), ("Turn  On", "turn on"),
])
def test_normalize_kws_label(label, norm):
    assert normalize_kws_label(label) == norm


def test_label_and_response_normalised_alike():
    for word in ["Yes!", "'no'", "(Stop)", "**go**", "Off."]:
        assert normalize_kws_label(word) == kws_first_word(word)


@pytest.mark.parametrize("response, kind", [
    ("", "empty"), ("  ", "empty"), ("...", "empty"), (None, "empty"),
    ("Sorry, I can't tell.", "refusal"), ("I\u2019m unable to determine the word.", "refusal"),
    ("There is no speech in this audio.", "refusal"), ("Inaudible", "refusal"),
    ("I don't know", "refusal"),
    ("The word is yes.", "multi_word"), ("yes it is", "multi_word"), ("bed or bad", "multi_word"),
    ("yes", ""), ("Yes.", ""), ("- go", ""), ("**No**", ""), ("silence", ""), ("none", ""),
])
def test_kws_non_answer(response, kind):
    assert kws_non_answer(response) == (kind != "", kind)


def test_score_kws_row_strict():
    assert score_kws_row("", "bed", False) == {
        "first_word": "silence", "correct": 1, "non_answer": True, "non_answer_kind": "empty",
        "correct_strict": 0}
    r = score_kws_row("The word is yes.", "bed", False)
    assert (r["correct"], r["correct_strict"], r["non_answer_kind"]) == (1, 0, "multi_word")
    r = score_kws_row("Yes, it is.", "yes", True)
    assert (r["correct"], r["correct_strict"]) == (1, 0)
    r = score_kws_row("Yes!", "Yes!", True)
    assert (r["first_word"], r["correct"], r["correct_strict"]) == ("yes", 1, 1)
    r = score_kws_row("cat", "bed", False)
    assert (r["correct"], r["correct_strict"], r["non_answer"]) == (1, 1, False)


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
        ("0002", "clean"): "Mr. Smith's 2 cats.",       # 0
        ("0002", "babble", 10): "mr smith s cats",       # 1 deletion / 5 words
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
              "ref_words", "delta_wer", "ref_empty", "score_failed", "ref_whisper", "hyp_whisper",
              "errors_whisper", "ref_words_whisper", "wer_whisper", "hyp_words", "is_loop",
              "loop_kind"):
        assert c in asr.columns
    row = asr.loc[_sid("asr", "0002", "babble", 10)]
    assert row["ref_norm"] == "mr smith s 2 cats" and row["ref_whisper"] == "mister smith is 2 cats"
    assert row["wer_whisper"] == pytest.approx(2 / 5)   # "mister smith s cats": 1 S + 1 D
    assert not asr["ref_empty"].any() and not asr["is_loop"].any()
    side = json.loads((tiny_ws.results / "scores" / "asr.json").read_text())
    assert side["n_errors"] == {"m1": 1}
    assert side["n_malformed_lines"] == {"m1": 1}
    assert side["n_rows"] == 5
    assert side["inference_dir"] == "inference"   # relative to the profile's data folder: shareable
    assert side["normalizer"]["version"] == textnorm.NORMALIZER_VERSION
    assert side["normalizer_whisper"]["version"] == textnorm.WHISPER_NORMALIZER_VERSION
    assert side["jiwer_version"] == textnorm.JIWER_VERSION
    assert side["n_empty_reference"] == {"m1": 0} and side["n_loops"] == {"m1": 0}
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
    assert kws.loc[_sid("kws", "k2", "babble", 0), "correct_strict"] == 1        # "unknown"
    assert not kws["non_answer"].any()
    side = json.loads((tiny_ws.results / "scores" / "kws.json").read_text())
    assert side["n_errors"] == {"m1": 0} and side["keywords"][0] == "yes"
    assert side["n_non_answers"] == {"m1": 0} and side["kws_rule"] == textnorm.KWS_RULE


def test_score_inference_empty_reference_and_non_answers(tiny_ws):
    man = pd.read_csv(tiny_ws.manifests / "asr.csv", dtype=str, keep_default_na=False)
    man.loc[man["speech_id"] == "0001", "transcript"] = "..."
    man.to_csv(tiny_ws.manifests / "asr.csv", index=False)
    p = tiny_ws.inference / "m1" / "kws.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    rows[3]["raw"] = "The word is yes."                 # k2 noisy, non-target
    _write_jsonl(p, rows)
    with pytest.warns(UserWarning, match="empty after normalisation"):
        out = score_inference(tiny_ws)
    asr = out["asr"].set_index("stimulus_id")
    noisy = asr.loc[_sid("asr", "0001", "babble", 10)]   # "the cat sat down" vs ""
    assert noisy["ref_empty"] and np.isnan(noisy["wer"]) and noisy["insertions"] == 4
    assert np.isnan(noisy["delta_wer"])
    side = json.loads((tiny_ws.results / "scores" / "asr.json").read_text())
    assert side["n_empty_reference"] == {"m1": 2}
    kws = out["kws"].set_index("stimulus_id").loc[_sid("kws", "k2", "babble", 0)]
    assert (kws["correct"], kws["correct_strict"], kws["non_answer_kind"]) == (1, 0, "multi_word")


def test_score_inference_keeps_last_success_on_rerun(tiny_ws):
    p = tiny_ws.inference / "m1" / "kws.jsonl"
    sid = _sid("kws", "k1", "babble", 0)
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    rows[1] = _row(sid, "k1", "babble", 0, "kws", "m1", "__ERROR__")  # the first run failed on it
    _write_jsonl(p, rows)
    with p.open("a", encoding="utf-8") as f:   # a resumed run retried the stimulus
        f.write(json.dumps(_row(sid, "k1", "babble", 0, "kws", "m1", "__ERROR__")) + "\n")
        f.write(json.dumps(_row(sid, "k1", "babble", 0, "kws", "m1", "yes")) + "\n")
    kws = score_inference(tiny_ws, tasks=["kws"])["kws"].set_index("stimulus_id")
    assert len(kws) == 4 and kws.loc[sid, "correct"] == 1
    side = json.loads((tiny_ws.results / "scores" / "kws.json").read_text())
    assert side["n_errors"] == {"m1": 0} and side["n_duplicates"] == {"m1": 2}


def test_score_inference_no_files(tmp_path):
    from aiplib.core.errors import AiplibError

    with pytest.raises(AiplibError, match="no inference files"):
        score_inference(workspace("demo", data_root=tmp_path))


# ------------------------------------------------- Unicode forms and languages without word spaces
def _asr_case(ws, refs: dict, answers: dict) -> None:
    """Rewrite the tiny workspace's ASR manifest with ``refs`` ({item: reference}) and its inference
    file with ``answers`` ({(item, bg, snr): answer}; clean: snr None), as real files."""
    man = pd.read_csv(ws.manifests / "asr.csv", dtype=str, keep_default_na=False)
    man["transcript"] = man["speech_id"].map(refs)
    man.to_csv(ws.manifests / "asr.csv", index=False)
    rows = [_row(_sid("asr", item, bg, snr), item, bg, snr, "asr", "m1", text)
            for (item, bg, snr), text in answers.items()]
    _write_jsonl(ws.inference / "m1" / "asr.jsonl", rows)


def test_reference_in_nfd_and_answer_in_nfc_score_wer_0(tiny_ws):
    import unicodedata

    sentence = "Le café est prêt"
    nfd, nfc = unicodedata.normalize("NFD", sentence), unicodedata.normalize("NFC", sentence)
    assert nfd != nfc and len(nfd) == len(nfc) + 2
    assert wer(nfd, nfc) == 0.0 and wer(nfc, nfd, normalizer="whisper") == 0.0
    assert normalize_text(nfd) == normalize_text(nfc) == "le caf\u00e9 est pr\u00eat"
    _asr_case(tiny_ws, {"0001": nfd, "0002": "the cat sat"},
              {("0001", "clean", None): nfc, ("0001", "babble", 10): "Le cafe est pr\u00eat",
               ("0002", "clean", None): "the cat sat"})
    asr = score_inference(tiny_ws, tasks=["asr"])["asr"].set_index("stimulus_id")
    assert asr.loc["0001_clean", "wer"] == 0.0            # was 0.5: café and prêt differed
    assert asr.loc["0001_babble_snr10", "wer"] == 0.25    # "cafe" without its accent: one word in 4
    assert "cer" not in asr.columns                      # a language with spaces: WER is the headline
    side = json.loads((tiny_ws.results / "scores" / "asr.json").read_text())
    assert side["normalizer"]["version"] == "2" and "NFC" in side["normalizer"]["rule"]
    assert "headline_measure" not in side


def test_cjk_references_strip_full_width_punctuation_and_make_cer_the_headline(tiny_ws):
    ref = "\u6211\u559c\u6b22\u732b\u3002"        # 我喜欢猫。 (full-width full stop)
    ref2 = "\u4eca\u5929\u5f88\u597d\uff01"      # 今天很好！
    assert wer(ref, "\u6211\u559c\u6b22\u732b") == 0.0  # was 1.0: "。" kept, one "word" against another
    _asr_case(tiny_ws, {"0001": ref, "0002": ref2},
              {("0001", "clean", None): "\u6211\u559c\u6b22\u732b",        # perfect, no punctuation
               ("0001", "babble", 10): "\u6211\u559c\u6b22\u72d7\u3002",  # 猫 → 狗: 1 of 4 characters
               ("0002", "clean", None): "\u4eca\u5929\u5f88\u597d\u3002"})
    with pytest.warns(UserWarning, match=r"asr/m1: the references are written without spaces between "
                                         r"words \(100% of their letters .*CER is the headline"):
        asr = score_inference(tiny_ws, tasks=["asr"])["asr"].set_index("stimulus_id")
    clean, noisy = asr.loc["0001_clean"], asr.loc["0001_babble_snr10"]
    assert clean["ref_norm"] == "\u6211\u559c\u6b22\u732b" and clean["wer"] == 0.0  # was 1.0
    assert asr.loc["0002_clean", "wer"] == 0.0 and asr.loc["0002_clean", "cer"] == 0.0
    assert noisy["wer"] == 1.0                           # the sentence is one "word"
    assert (noisy["char_errors"], noisy["ref_chars"], noisy["cer"]) == (1, 4, 0.25)
    assert noisy["delta_cer"] == 0.25 and noisy["delta_wer"] == 1.0
    cols = list(asr.columns)
    assert cols[cols.index("wer") + 1: cols.index("wer") + 4] == ["char_errors", "ref_chars", "cer"]
    side = json.loads((tiny_ws.results / "scores" / "asr.json").read_text())
    assert side["headline_measure"] == "cer"
    back = pd.read_csv(tiny_ws.results / "scores" / "asr.csv")
    assert back["cer"].tolist() == [0.0, 0.25, 0.0]
    assert textnorm.spaceless_share([ref, ref2]) == 1.0 and textnorm.headline_measure([ref]) == "cer"
    assert textnorm.headline_measure(["the cat sat", ref]) == "wer"  # 4 of 13 letters are CJK
