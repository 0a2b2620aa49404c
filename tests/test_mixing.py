"""The mixer is the authors' (IvLabs/AIP-Speech mixing/mix.py): checked against an independent
re-implementation of the formula written here (soundfile + pyloudnorm + numpy only)."""
import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from aiplib.io.audio import loudness_lufs, normalize_loudness, write_wav
from aiplib.io.formats import read_manifest
from aiplib.stimuli.families import materialize, mix_components
from aiplib.stimuli.manifests import build_manifests
from aiplib.stimuli.mixing import BG_SILENCE_POWER, achieved_snr_db, background_segment, bg_offset, mix


def _reference_mix(speech_file, bg_file, snr_db, seed, clean):
    """The published formula, step by step (not calling aiplib)."""
    import pyloudnorm

    x, sr = sf.read(str(speech_file), dtype="float32")
    assert sr == 16000
    meter = pyloudnorm.Meter(16000)
    lufs = meter.integrated_loudness(x)
    s = x if np.isinf(lufs) else pyloudnorm.normalize.loudness(x, lufs, -23.0).astype(np.float32)
    if clean:
        return s
    bg, _ = sf.read(str(bg_file), dtype="float32")
    if len(bg) < len(s):
        bg = np.tile(bg, int(np.ceil(len(s) / len(bg))))
    off = int(np.random.default_rng(int(seed)).integers(0, max(1, len(bg) - len(s))))
    b = bg[off: off + len(s)]
    ps = float(np.mean(s ** 2)) + 1e-9
    pb = float(np.mean(b ** 2)) + 1e-9
    b = b * np.sqrt(ps / (pb * (10 ** (float(snr_db) / 10))))
    y = s + b
    peak = float(np.max(np.abs(y)))
    return (y / peak if peak > 1.0 else y).astype(np.float32)


def _sig(seed, scale, n=48000):
    return (scale * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


def test_manifest_rows_bit_identical_to_reference_formula(tiny_ws):
    # one loud background (the sum clips and is divided by its peak), one shorter than the speech (tiled)
    clicks = np.zeros(3 * 16000, dtype=np.float32)
    clicks[::4000] = 0.5  # impulsive: scaled to the speech power, its clicks exceed full scale
    write_wav(tiny_ws.bg / "bg00.wav", clicks)
    write_wav(tiny_ws.bg / "bg01.wav", _sig(8, 0.05, 4000))
    build_manifests(tiny_ws)
    man = read_manifest(tiny_ws, "asr")
    rows = pd.concat([man[man["background_id"].isin(["bg00", "bg01"])], man[man["condition"] == "clean"],
                      man.sample(15, random_state=1)])
    clipped = 0
    for r in rows.to_dict("records"):
        r.pop("bg_offset")  # a row of the authors' schema: the offset follows from the seed
        y, info = materialize(r, tiny_ws)
        ref = _reference_mix(tiny_ws.path(r["speech_path"]), tiny_ws.path(r["bg_path"]) if r["bg_path"] else None,
                             r["snr_db"], r["seed"], r["condition"] == "clean")
        assert y.dtype == np.float32 and y.tobytes() == ref.tobytes(), r["id"]
        clipped += info.clip_scale < 1.0
    assert clipped > 0  # the peak division was exercised


def test_offset_rule_and_informational_column(tiny_ws):
    build_manifests(tiny_ws)
    man = read_manifest(tiny_ws, "kws")
    noisy = man[man["condition"] == "noisy"].head(30)
    for r in noisy.to_dict("records"):
        n_bg = sf.info(str(tiny_ws.path(r["bg_path"]))).frames
        expected = int(np.random.default_rng(r["seed"]).integers(0, max(1, n_bg - r["n_samples"])))
        assert r["bg_offset"] == expected == bg_offset(r["seed"], n_bg, r["n_samples"])
        assert materialize(r, tiny_ws)[1].bg_offset == expected
    # tiling: a 3-sample background for 7 samples is tiled to 9 -> offsets in [0, 2)
    seg, off = background_segment(np.arange(3, dtype=np.float32), 0, 7)
    assert off == int(np.random.default_rng(0).integers(0, 2))
    assert seg.tolist() == np.tile(np.arange(3), 3)[off: off + 7].tolist()
    assert bg_offset(5, 10, 10) == 0  # equal lengths: integers(0, 1)


def test_silent_background_segment_is_effectively_clean_not_an_error(tiny_ws):
    # ESC-50-style clip: 0.5 s of noise, then zero padding for 2.5 s
    bg = np.zeros(3 * 16000, dtype=np.float32)
    bg[:8000] = _sig(3, 0.1, 8000)
    write_wav(tiny_ws.bg / "bg02.wav", bg)
    build_manifests(tiny_ws)
    man = read_manifest(tiny_ws, "asr")
    sub = man[man["background_id"] == "bg02"]
    assert (~sub["bg_active"]).sum() > 0 and sub["bg_active"].sum() > 0
    clean = {r["speech_id"]: materialize(r, tiny_ws)[0] for r in man[man["condition"] == "clean"].to_dict("records")}
    for r in sub.to_dict("records"):
        y, info = materialize(r, tiny_ws)
        assert info.bg_active == bool(r["bg_active"])
        seg = bg[r["bg_offset"]: r["bg_offset"] + r["n_samples"]] if r["bg_offset"] + r["n_samples"] <= len(bg) else None
        if seg is not None:
            assert bool(r["bg_active"]) == (float(np.mean(seg.astype(np.float64) ** 2)) >= BG_SILENCE_POWER)
        if not r["bg_active"] and not np.any(seg):
            assert y.tobytes() == clean[r["speech_id"]].tobytes()  # all-zero segment: exactly the clean stimulus
            assert info.achieved_snr_db == float("inf")
    meta = (tiny_ws.manifests / "asr.json").read_text()
    assert '"bg02"' in meta


def test_silent_speech_is_left_unchanged():
    s = np.zeros(16000, dtype=np.float32)
    y, info = mix(s, None, 0.0, 0)
    assert y.tobytes() == s.tobytes() and info.speech_lufs == float("-inf")


def test_achieved_snr_close_to_target_without_clipping():
    s, b = _sig(1, 0.05), _sig(2, 0.2)
    for snr in (0.0, 5.0, 10.0):
        y, info = mix(s, b, snr, 3)
        assert info.clip_scale == 1.0
        assert abs(info.achieved_snr_db - snr) < 0.01
        parts_snr = achieved_snr_db(np.ones(4), np.zeros(4))
        assert parts_snr == float("inf")


def test_components_add_up_to_the_mixture(tiny_ws):
    build_manifests(tiny_ws)
    man = read_manifest(tiny_ws, "asr")
    r = man[man["condition"] == "noisy"].iloc[7].to_dict()
    p = mix_components(r, tiny_ws)
    assert p["mixture"].tobytes() == materialize(r, tiny_ws)[0].tobytes()
    np.testing.assert_allclose(p["speech"] + p["background"], p["mixture"], atol=1e-6)


def test_sine_normalised_to_minus_23_lufs():
    t = np.arange(16000 * 3) / 16000
    y = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    out, gain_db, before = normalize_loudness(y, -23.0)
    assert abs(loudness_lufs(out) - (-23.0)) < 0.1
    assert abs(before + gain_db - (-23.0)) < 1e-9


def test_write_wav_same_samples_same_bytes(tmp_path):
    import time

    from aiplib.io.audio import load_audio

    y = _sig(9, 0.1, 1600)
    a = write_wav(tmp_path / "a.wav", y).read_bytes()
    time.sleep(1.1)  # libsndfile's PEAK chunk would record a different second
    b = write_wav(tmp_path / "b.wav", y).read_bytes()
    assert a == b
    assert np.array_equal(load_audio(tmp_path / "a.wav"), y)


def test_a_speech_file_shorter_than_the_loudness_block_is_named(tmp_path):
    """Stage 5/7's mixer names the file pyloudnorm refuses, with its length (0.4 s BS.1770 block)."""
    from aiplib.core.errors import AudioFileError
    from aiplib.stimuli.mixing import normalized_speech

    short = tmp_path / "short.wav"
    write_wav(short, (0.1 * np.sin(np.arange(978) / 5)).astype(np.float32))
    with pytest.raises(AudioFileError) as exc:
        normalized_speech(short)
    assert str(exc.value).startswith(f"{short}: loudness cannot be measured (978 samples = 0.061 s at 16000 Hz, "
                                     "shorter than the 0.4 s BS.1770 block)")


def test_active_part_snr_only_past_one_second_of_silence_and_never_in_paper(tiny_ws):
    """A 1 s clip keeps the authors' whole-clip SNR bit for bit even with 0.7 s of silence (the
    demo's keyword clips have at most 0.71 s); a 3 s clip with 2 s of silence before its word gets
    the label's SNR over the word; the paper profile keeps the whole-clip SNR for both."""
    import shutil

    from aiplib.core.workspace import workspace
    from aiplib.stimuli.mixing import mix_row

    rng = np.random.default_rng(7)
    word = (0.1 * rng.standard_normal(16000) * np.hanning(16000)).astype(np.float32)
    quiet = (1e-4 * rng.standard_normal(2 * 16000)).astype(np.float32)
    write_wav(tiny_ws.itembanks / "audio" / "kws" / "k00.wav", np.r_[quiet[:11200], word[::2][:4800]])  # 1 s
    write_wav(tiny_ws.itembanks / "audio" / "kws" / "k01.wav", np.r_[quiet, word])  # 3 s
    build_manifests(tiny_ws)
    man = read_manifest(tiny_ws, "kws")
    paper = workspace("paper", data_root=tiny_ws.root.parent / "paper_root", create=False)
    shutil.copytree(tiny_ws.root, paper.root)
    for r in man[man["condition"] == "noisy"].groupby("speech_id").head(6).to_dict("records"):
        ref = _reference_mix(tiny_ws.path(r["speech_path"]), tiny_ws.path(r["bg_path"]), r["snr_db"], r["seed"], False)
        parts = mix_row(r, tiny_ws)
        assert mix_row(r, paper)["mixture"].tobytes() == ref.tobytes(), r["id"]  # paper: the authors' mixer
        if r["speech_id"] == "k00":
            assert parts["mixture"].tobytes() == ref.tobytes(), r["id"]
            continue
        s, b = parts["speech"].astype(np.float64), parts["background"].astype(np.float64)
        word_snr = 10 * np.log10(np.sum(s[32000:] ** 2) / np.sum(b[32000:] ** 2))
        whole_snr = 10 * np.log10(np.sum(s ** 2) / np.sum(b ** 2))
        assert word_snr == pytest.approx(r["snr_db"], abs=0.5) and whole_snr == pytest.approx(r["snr_db"] - 4.8, abs=0.5)
        assert parts["info"].achieved_snr_db == pytest.approx(r["snr_db"], abs=1e-3)
