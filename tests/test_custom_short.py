"""Custom-profile validation of short and empty files (new-user trial): the 0.4 s BS.1770 block, the
words-per-second warning, a 0-byte file, found vs accepted counts, and the stage-6 loudness error
naming its file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from test_custom import make_inputs, noise, voice_like, write

from aiplib.io.audio import MIN_LOUDNESS_S, SR, loudness_meter
from aiplib.scoring import wer_check
from aiplib.sources.corpora import custom
from aiplib.sources.corpora.custom.validate import MIN_S_PER_WORD


def _add_speech(params: dict, name: str, y, text: str, sr: int = SR) -> Path:
    p = write(Path(params["speech_dir"]) / name, y, sr)
    texts = pd.read_csv(params["texts"])
    pd.concat([texts, pd.DataFrame({"file": [name], "text": [text]})]).to_csv(params["texts"], index=False)
    return p


def _kinds(report, severity="fatal"):
    return {(p.kind, Path(p.file).name): p.message for p in report.problems if p.severity == severity}


def test_the_rule_is_pyloudnorms_block_size():
    """Validation's threshold is the block the meter uses: pyloudnorm refuses 0.39 s, measures 0.41 s."""
    assert MIN_LOUDNESS_S == 0.4 and loudness_meter(SR).block_size == MIN_LOUDNESS_S
    with pytest.raises(ValueError, match="greater than the block size"):
        loudness_meter(SR).integrated_loudness(voice_like(0.39).astype(np.float64))
    assert np.isfinite(loudness_meter(SR).integrated_loudness(voice_like(0.41).astype(np.float64)))


def test_utterance_of_039_s_is_fatal_041_s_passes(tmp_path):
    params = make_inputs(tmp_path / "in")
    _add_speech(params, "short.wav", voice_like(0.39), "hi")
    _add_speech(params, "ok.wav", voice_like(0.41), "hi")
    r = custom.validate_inputs(**params)
    fatal = _kinds(r)
    assert list(fatal) == [("too_short", "short.wav")]
    msg = fatal[("too_short", "short.wav")]
    assert msg.startswith("utterance: 0.390 s (6240 samples at 16000 Hz) is shorter than the 0.4 s ITU-R BS.1770 "
                          "gating block")
    assert "ok" in {x["item_id"] for x in r.speech} and "short" not in {x["item_id"] for x in r.speech}
    assert next(x for x in r.speech if x["item_id"] == "ok")["duration_s"] == pytest.approx(0.41)


def test_the_trials_truncated_wav_of_978_frames(tmp_path):
    """The new user's 0.06 s file passed validation, then failed stage 6; now it is refused by name."""
    params = make_inputs(tmp_path / "in")
    _add_speech(params, "truncated_take.wav", voice_like(1.0)[:978], "this is my truncated take")
    r = custom.validate_inputs(**params)
    assert not r.ok
    msg = _kinds(r)[("too_short", "truncated_take.wav")]
    assert "0.061 s (978 samples at 16000 Hz)" in msg and "truncated" in msg
    assert "truncated_take.wav: utterance: 0.061 s" in r.summary()


def test_short_keyword_clip_and_background_are_fatal(tmp_path):
    params = make_inputs(tmp_path / "in")
    kw, bg = Path(params["kws_dir"]), Path(params["backgrounds_dir"])
    write(kw / "short_yes.wav", voice_like(0.3, seed=3))
    labels = pd.read_csv(params["kws_labels"], sep="\t")
    pd.concat([labels, pd.DataFrame({"file": ["short_yes.wav"], "label": ["yes"]})]).to_csv(
        params["kws_labels"], sep="\t", index=False)
    write(bg / "tiny_click.wav", noise(0.1, seed=4))
    r = custom.validate_inputs(**params)
    fatal = _kinds(r)
    assert set(fatal) == {("too_short", "short_yes.wav"), ("too_short", "tiny_click.wav")}
    assert fatal[("too_short", "short_yes.wav")].startswith("keyword clip: 0.300 s (4800 samples at 16000 Hz)")
    assert fatal[("too_short", "tiny_click.wav")].startswith("background: 0.100 s (1600 samples at 16000 Hz)")
    assert "tiny_click" not in {b["bg_id"] for b in r.backgrounds}
    # the short background is no longer also reported as looped: it is not accepted at all
    assert ("bg_looped", "tiny_click.wav") not in _kinds(r, "warning")


def test_a_rate_converted_file_is_judged_on_its_16k_length(tmp_path):
    """A 44.1 kHz file of 0.42 s passes (6720 samples at 16 kHz), one of 0.38 s does not (6080)."""
    params = make_inputs(tmp_path / "in")
    _add_speech(params, "cd_ok.wav", voice_like(0.42, 44100), "fine", 44100)
    _add_speech(params, "cd_short.wav", voice_like(0.38, 44100), "short", 44100)
    r = custom.validate_inputs(**params)
    assert list(_kinds(r)) == [("too_short", "cd_short.wav")]
    assert "0.380 s (6080 samples at 16000 Hz)" in _kinds(r)[("too_short", "cd_short.wav")]


def test_utterance_short_for_its_transcript_is_a_warning(tmp_path):
    params = make_inputs(tmp_path / "in")
    nine = "the quick brown fox jumps over the lazy dog"
    _add_speech(params, "rushed.wav", voice_like(0.5), nine)      # 0.5 s < 0.1 × 9 = 0.9 s
    _add_speech(params, "enough.wav", voice_like(0.95), nine)     # 0.95 s ≥ 0.9 s
    _add_speech(params, "brackets.wav", voice_like(0.5), "[noise] uh yes, OK")  # 2 words count after normalising
    r = custom.validate_inputs(**params)
    assert r.ok, r.summary()
    warned = _kinds(r, "warning")
    assert ("short_for_text", "enough.wav") not in warned and ("short_for_text", "brackets.wav") not in warned
    msg = warned[("short_for_text", "rushed.wav")]
    assert msg.startswith(f"utterance: 0.50 s for 9 words of transcript (0.056 s per word, under {MIN_S_PER_WORD:g} "
                          "s per word")
    assert {"rushed", "enough", "brackets"} <= {x["item_id"] for x in r.speech}  # warned, still accepted


def test_zero_byte_file_says_empty_file(tmp_path):
    params = make_inputs(tmp_path / "in")
    p = Path(params["speech_dir"]) / "empty_take.wav"
    p.write_bytes(b"")
    texts = pd.read_csv(params["texts"])
    pd.concat([texts, pd.DataFrame({"file": ["empty_take.wav"], "text": ["nothing here"]})]).to_csv(
        params["texts"], index=False)
    write(Path(params["backgrounds_dir"]) / "zero.wav", np.zeros(0, dtype=np.float32))  # a header, no samples
    (Path(params["kws_dir"]) / "blank.flac").write_bytes(b"")
    labels = pd.read_csv(params["kws_labels"], sep="\t")
    pd.concat([labels, pd.DataFrame({"file": ["blank.flac"], "label": ["go"]})]).to_csv(
        params["kws_labels"], sep="\t", index=False)
    r = custom.validate_inputs(**params)
    fatal = _kinds(r)
    assert fatal[("empty", "empty_take.wav")] == "utterance: empty file (0 bytes)"
    assert fatal[("empty", "blank.flac")] == "keyword clip: empty file (0 bytes)"
    assert fatal[("empty", "zero.wav")] == "background: the file holds no audio samples"
    assert not any(k == "unreadable" for k, _ in fatal)
    assert "empty_take.wav: utterance: empty file (0 bytes)" in r.summary()


def test_summary_counts_found_and_accepted_the_same_way(tmp_path):
    """The trial's summary said '4 backgrounds' while the folder line said '5 audio file(s) found'."""
    params = make_inputs(tmp_path / "in", n_bg=4)
    write(Path(params["backgrounds_dir"]) / "silent.wav", np.zeros(3 * SR, dtype=np.float32))
    r = custom.validate_inputs(**params)
    assert [(p.kind, Path(p.file).name) for p in r.fatal] == [("silent", "silent.wav")]
    lines = r.summary().splitlines()
    assert lines[0] == ("custom inputs: 2 utterances accepted of 2 found, 4 keyword clips accepted (1 skipped) of 5 "
                        "found, 4 backgrounds accepted of 5 found — 1 fatal problem(s), 5 warning(s)")
    assert lines[1].endswith(": 2 audio file(s) found in 2 folder(s); 2 accepted, 0 rejected")
    assert lines[4] == f"  kws_dir {params['kws_dir']}: 5 audio file(s) found in 1 folder(s); 4 accepted, " \
                       "1 skipped, 0 rejected"
    assert lines[5] == (f"  backgrounds_dir {params['backgrounds_dir']}: 5 audio file(s) found in 1 folder(s); "
                        "4 accepted, 1 rejected (FATAL below)")
    few = next(p.message for p in r.warnings if p.kind == "few_backgrounds")
    assert few.startswith("only 4 backgrounds accepted (fewer than 8)")  # the accepted count, not the 5 found


def test_stage6_loudness_error_names_the_speech_file(tiny_ws, monkeypatch):
    """A speech file shorter than the block reaching the mixer: the error names it and its length."""
    from aiplib.core.errors import AudioFileError
    from aiplib.io.audio import write_wav
    from aiplib.stimuli import checks
    from aiplib.stimuli.manifests import build_manifests

    build_manifests(tiny_ws)
    short = tiny_ws.itembanks / "audio" / "asr" / "a00.wav"
    write_wav(short, voice_like(1.0)[:978])

    class Fake:
        def generate(self, audios, prompts):
            return ["word" for _ in audios]

        def close(self):
            pass

    monkeypatch.setattr("aiplib.inference.models.load_model", lambda model, **opts: Fake())
    with pytest.raises(AudioFileError) as exc:
        wer_check.wer_constancy(tiny_ws, n_items=2, seed=0)
    msg = str(exc.value)
    assert msg.startswith(f"{short}: loudness cannot be measured (978 samples = 0.061 s at 16000 Hz, shorter "
                          "than the 0.4 s BS.1770 block): Audio must have length greater than the block size.")
    assert msg.endswith("(stimulus 'a00_clean')")
    assert sf.info(str(short)).frames == 978


def test_background_whose_trimmed_copy_is_under_the_block_is_fatal(tmp_path):
    """0.65 s of file, but 0.3 s digital silence + a 50 ms burst + 0.3 s digital silence: stage 1's
    trimmed copy (the one stage 3 loops) is 0.29 s, under the 0.4 s block the raw file passes."""
    params = make_inputs(tmp_path / "in")
    t = np.arange(int(0.05 * SR)) / SR
    burst = 0.5 * np.sin(2 * np.pi * 440 * t)
    y = np.concatenate([np.zeros(int(0.3 * SR)), burst, np.zeros(int(0.3 * SR))]).astype(np.float32)
    write(Path(params["backgrounds_dir"]) / "burst.wav", y)
    r = custom.validate_inputs(**params)
    fatal = _kinds(r)
    assert set(fatal) == {("too_short", "burst.wav")}
    assert fatal[("too_short", "burst.wav")].startswith(
        "background: 0.290 s (4640 samples at 16000 Hz) after shortening its digital silence (0.650 s as "
        "recorded) is shorter than the 0.4 s")
    assert "burst" not in {b["bg_id"] for b in r.backgrounds}
