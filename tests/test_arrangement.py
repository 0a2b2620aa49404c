"""The embedded Whisper's CPU arrangements (aiplib.inference.models.whisper_window.ARRANGEMENTS)
give the same transcripts, byte for byte: one clip per encoder call on one worker with intra-op
threads and the whole batch in one decoder call (``per_clip``) against today's sub-batches per
worker (``sub_batches``), on clean and 0 dB stimuli, with two prompts (the second reusing the
cached encoder outputs, as stage 7 does)."""
from pathlib import Path

import numpy as np
import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.inference.models import get_entry, load_model
from aiplib.inference.plan import DecodingConfig
from aiplib.inference.prompts import prompt_for
from aiplib.io.audio import load_audio

FK = Path(__file__).resolve().parents[2] / "shared" / "fieldkit"  # ../shared beside the project
FILES = [FK / "speech_asr" / "ls_test-clean_1089-134691-0000.flac",
         FK / "speech_asr" / "ljspeech_LJ002-0020.wav",
         FK / "kws" / "sc2_go_1acc97de_nohash_1.wav",
         FK / "kws" / "sc2_stop_3f170018_nohash_0.wav"]
BG = FK / "backgrounds" / "sc_bg_running_tap.wav"
needs_fieldkit = pytest.mark.skipif(not all(f.is_file() for f in [*FILES, BG]),
                                    reason="fieldkit clips not present")


def test_unknown_arrangement_is_refused_before_any_model_loads():
    assert DecodingConfig(arrangement="per_clip").arrangement == "per_clip"
    with pytest.raises(AiplibParameterError, match="arrangement must be one of per_clip, sub_batches"):
        DecodingConfig(arrangement="per-clip")


def _stimuli() -> list[np.ndarray]:
    """8 stimuli (one stage-7 batch): each clip clean and mixed with the tap background at 0 dB."""
    bg = load_audio(BG)
    out = []
    for f in FILES:
        y = load_audio(f)
        noise = np.resize(bg, len(y))
        gain = np.sqrt(np.sum(y ** 2) / np.sum(noise ** 2))  # 0 dB
        m = y + gain * noise
        out += [y, (m / max(1.0, np.abs(m).max() / 0.99)).astype(np.float32)]
    return out


@pytest.mark.slow
@needs_fieldkit
def test_per_clip_arrangement_gives_the_same_transcripts_as_sub_batches():
    stims = _stimuli()
    prompts = [prompt_for("asr")[1], prompt_for("asr_steer_p5")[1]]
    got = {}
    for arrangement in ("sub_batches", "per_clip"):
        rec = load_model(get_entry("whisper_tiny_en"), path="fast", arrangement=arrangement)
        try:
            info = rec.info()
            got[arrangement] = [rec.generate(stims, [p] * len(stims)) for p in prompts]
        finally:
            rec.close()
        assert info["arrangement"] == arrangement
        assert info["encode_per_clip"] is (arrangement == "per_clip")
        if arrangement == "per_clip":
            assert info["workers"] == 1 and info["cpu_threads"] >= 1
    assert got["per_clip"] == got["sub_batches"]  # str ==: byte for byte
    clean = got["per_clip"][0][0].lower()
    assert "he could wait no longer" in clean.replace(",", "").replace(".", "")
