"""Tests of aiplib.battery.descriptors: real values on known signals, the VAD, and the resumable table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aiplib.battery import descriptors as D
from aiplib.battery import vad
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.workspace import workspace
from aiplib.io.audio import load_audio, write_wav

SR = 16000
SPEECH = Path(__file__).resolve().parents[2] / "shared" / "fieldkit" / "speech_asr" / "ls_test-clean_1995-1837-0001.wav"  # read-only


def _sine(f=1000.0, dur=2.0, amp=0.5):
    t = np.arange(int(dur * SR)) / SR
    return (amp * np.sin(2 * np.pi * f * t + 0.1)).astype(np.float32)


def _white(dur=2.0, seed=0, amp=0.1):
    return (amp * np.random.default_rng(seed).standard_normal(int(dur * SR))).astype(np.float32)


def _am_sine(dur=2.0):
    t = np.arange(int(dur * SR)) / SR
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 2.0 * t)  # 2 Hz, full-depth amplitude modulation
    return (0.5 * env * np.sin(2 * np.pi * 1000 * t + 0.1)).astype(np.float32)


# ------------------------------------------------------------------------------- constants


def test_names_and_info():
    assert D.DESCRIPTORS == ["zcr", "spectral_centroid", "spectral_rolloff", "spectral_bandwidth",
                             "spectral_flux", "spectral_flatness", "spectral_contrast", "rms_variance",
                             "vad_speech_fraction"]
    assert D.TABLE_COLUMNS == ["bg_id", *D.DESCRIPTORS, "silent_frame_share"]
    assert list(D.DESCRIPTOR_INFO) == D.DESCRIPTORS
    for name, info in D.DESCRIPTOR_INFO.items():
        assert len(info) == 3 and all(isinstance(x, str) and x for x in info), name
    # librosa's defaults at 16 kHz, as the authors' extract_acoustic_descriptors
    assert D.FRAME["n_fft"] == 2048 and D.FRAME["hop_length"] == 512 and D.FRAME["center"] is True
    assert D.FRAME["rolloff_percent"] == 0.85 and "included" in D.FRAME["silent_frames"]
    assert vad.VAD_SETTINGS["window_size_samples"] == 512
    assert (vad.VAD_SETTINGS["min_speech_duration_ms"], vad.VAD_SETTINGS["min_silence_duration_ms"]) == (250, 100)


# ------------------------------------------------------------------------------- spectral values


def test_sine_values():
    d = D.spectral_descriptors(_sine(), SR)
    assert list(d) == D.DESCRIPTORS[:8]
    assert d["zcr"] == pytest.approx(0.125, abs=0.005)             # 2 crossings / 16-sample period
    assert d["spectral_centroid"] == pytest.approx(1000, abs=10)
    assert d["spectral_rolloff"] == pytest.approx(1000, abs=2 * SR / 2048)  # within two bins (7.8 Hz)
    assert d["spectral_bandwidth"] < 60
    assert d["spectral_flatness"] < 1e-4
    assert d["spectral_flux"] < 0.01                                  # dB: the spectrum does not change
    assert d["spectral_contrast"] > 25


def test_rms_variance_of_constant_amplitude_sine_by_hand():
    """All frames count, the four zero-padded edge frames included (librosa centres frames).

    A 1 kHz sine (period 16 samples) of amplitude 0.5: every whole frame has RMS 0.5/sqrt(2); the
    frames centred at samples 0, 512 and (for n = 32000) 31232, 31744 hold 1024, 1536, 1792 and
    1280 signal samples (whole periods), so their RMS is 0.5/sqrt(2) * sqrt(k / 2048).
    """
    y = _sine(dur=2.0)
    n_frames = 1 + y.size // 512
    assert n_frames == 63
    full = 0.5 / np.sqrt(2)
    rms = np.full(n_frames, full)
    rms[[0, 1, -2, -1]] = full * np.sqrt(np.array([1024, 1536, 1792, 1280]) / 2048)
    d = D.spectral_descriptors(y, SR)
    assert d["rms_variance"] == pytest.approx(np.var(rms), rel=1e-4)   # 2.86e-4
    # in the interior the level is constant: ~0 without the edge frames
    long = D.spectral_descriptors(_sine(dur=30.0), SR)["rms_variance"]
    assert long < d["rms_variance"] / 10


def test_white_noise_values():
    w = D.spectral_descriptors(_white(), SR)
    s = D.spectral_descriptors(_sine(), SR)
    assert w["zcr"] == pytest.approx(0.5, abs=0.01)
    assert w["spectral_centroid"] == pytest.approx(SR / 4, rel=0.005)   # flat spectrum: 4000 Hz
    # power of a complex Gaussian bin is exponential: E[log P] = log E[P] - gamma -> flatness e^-gamma
    assert w["spectral_flatness"] == pytest.approx(np.exp(-np.euler_gamma), abs=0.005)  # 0.5615
    assert w["spectral_flatness"] > 1e3 * s["spectral_flatness"]
    assert w["spectral_contrast"] < s["spectral_contrast"]
    assert w["spectral_flux"] == pytest.approx(0.8229, abs=1e-3)      # librosa 0.11, seed 0


def test_flux_of_a_step():
    """Silence then white noise: one onset of (almost) the whole 80 dB range of onset_strength."""
    step = np.concatenate([np.zeros(SR, np.float32), _white(dur=1.0)])
    n_frames = 1 + step.size // 512
    d = D.spectral_descriptors(step, SR)
    steady = D.spectral_descriptors(_white(dur=2.0), SR)["spectral_flux"]
    onset_db = d["spectral_flux"] * n_frames - steady * (n_frames / 2)   # dB summed over frames
    assert 60 < onset_db < 80                                            # measured 69 dB
    assert d["spectral_flux"] == pytest.approx(1.5063, abs=1e-3)        # regression, librosa 0.11
    assert d["spectral_flux"] > steady


def test_rms_variance_am_larger():
    steady = D.spectral_descriptors(_sine(dur=30.0), SR)["rms_variance"]
    am = D.spectral_descriptors(_am_sine(dur=30.0), SR)["rms_variance"]
    assert steady < 1e-4
    assert am > 100 * steady                                          # measured 0.0115


def test_level_invariance_of_shape_descriptors():
    a = D.spectral_descriptors(_white(amp=0.1), SR)
    b = D.spectral_descriptors(_white(amp=0.01), SR)
    for k in ("zcr", "spectral_centroid", "spectral_rolloff", "spectral_bandwidth", "spectral_flux",
              "spectral_flatness", "spectral_contrast"):
        assert a[k] == pytest.approx(b[k], rel=1e-4), k


def test_silent_frames_are_in_the_means():
    """Issue 15 item 10: white noise half silent. Over all frames (the authors' definition) the
    centroid is the sounding frames' ~4000 Hz times their share; without the silent frames it
    would be ~4005 Hz."""
    y = np.concatenate([np.zeros(40000, np.float32), _white(dur=2.5)])   # 5 s, first half silent
    share = D.silent_frame_share(y)
    n_frames = 1 + y.size // 512
    assert n_frames == 157
    # frames centred at 0, 512, ..., 38912 hold only zeros: (38912 + 1024 < 40000) -> 77 frames
    assert share == pytest.approx(77 / 157)
    d = D.spectral_descriptors(y, SR)
    assert d["spectral_centroid"] == pytest.approx(4000 * (1 - share), rel=0.005)   # 2040 Hz
    assert d["spectral_centroid"] == pytest.approx(2040.5, abs=1.0)                 # regression
    # silent frames have flatness 1 (amin floor), sounding white noise e^-gamma
    assert d["spectral_flatness"] == pytest.approx(share + (1 - share) * np.exp(-np.euler_gamma),
                                                   abs=0.005)
    assert D.silent_frame_share(_white()) == 0.0


@pytest.mark.parametrize("bad, match", [
    (np.array([0.0, np.nan] * 1000, dtype=np.float32), "NaN"),
    (np.array([0.0, np.inf] * 1000, dtype=np.float32), "NaN or infinite"),
    (np.zeros((2, 1000), np.float32), r"\(2, 1000\)"),
    (np.zeros(100, np.float32), "at least 2048"),
    (np.zeros(4000, np.float32), "silence"),
    (np.arange(4000), "dtype"),
])
def test_bad_input(bad, match):
    with pytest.raises(AiplibParameterError, match=match):
        D.compute_descriptors(bad)


def test_wrong_rate():
    with pytest.raises(AiplibParameterError, match="16000"):
        D.spectral_descriptors(_sine(), 22050)
    with pytest.raises(AiplibParameterError, match="8000 or 16000"):
        vad.vad_speech_fraction(_sine(), sr=44100)
    with pytest.raises(AiplibParameterError, match="threshold"):
        vad.vad_speech_fraction(_sine(), threshold=1.5)


# ------------------------------------------------------------------------------- VAD


@pytest.mark.slow
def test_vad_white_noise_and_sine():
    assert vad.vad_speech_fraction(_white(dur=5.0)) < 0.1
    assert vad.vad_speech_fraction(_sine(dur=5.0)) < 0.1


@pytest.mark.slow
def test_vad_threads_restored():
    """silero_vad sets torch's thread count to 1 on import; aiplib must put the user's back."""
    import subprocess
    import sys

    code = ("import torch; torch.set_num_threads(3); import numpy as np; from aiplib.battery import vad; "
            "vad.load_vad_model(); vad.vad_speech_fraction(np.zeros(16000, np.float32) + 0.01); "
            "print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip().splitlines()[-1] == "3"


@pytest.mark.skipif(not SPEECH.is_file(), reason="shared speech sample (../shared/fieldkit) not available")
def test_real_speech():
    y = load_audio(SPEECH)                                   # read in place, never copied
    d = D.compute_descriptors(y)
    assert list(d) == D.DESCRIPTORS
    assert d["vad_speech_fraction"] > 0.3                   # measured 0.94
    assert 0.0 < d["spectral_flatness"] < 0.3
    assert d["rms_variance"] > D.spectral_descriptors(_sine(), SR)["rms_variance"]
    assert vad.load_vad_model() is vad.load_vad_model()          # loaded once


# ------------------------------------------------------------------------------- table


@pytest.fixture
def demo_ws(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    rows = []
    for bg_id, y in (("white", _white(dur=3.0)), ("tone", _sine(dur=3.0)), ("am", _am_sine(dur=3.0))):
        write_wav(ws.bg / f"{bg_id}.wav", y)
        rows.append({"bg_id": bg_id, "category": "stationary", "path": f"bg/{bg_id}.wav"})
    pd.DataFrame(rows).to_csv(ws.descriptors / "battery.csv", index=False)
    return ws


def test_descriptor_table_and_resume(demo_ws, monkeypatch):
    ws = demo_ws
    t1 = D.descriptor_table(ws, progress=False)
    csv = ws.descriptors / "acoustic_descriptors.csv"
    side = ws.descriptors / "acoustic_descriptors.json"
    assert list(t1.columns) == D.TABLE_COLUMNS
    assert list(t1["bg_id"]) == ["white", "tone", "am"]
    on_disk = pd.read_csv(csv)
    assert list(on_disk.columns) == D.TABLE_COLUMNS
    assert (t1["silent_frame_share"] == 0.0).all()
    pd.testing.assert_frame_equal(on_disk, t1)
    meta = json.loads(side.read_text())
    assert meta["settings"]["frame"]["n_fft"] == 2048 and meta["settings"]["frame"]["hop_length"] == 512
    assert meta["settings"]["silent_frames_in_means"] is True
    assert meta["settings"]["definition_version"] == 2
    assert meta["settings"]["vad_threshold"] == 0.5
    assert meta["versions"]["librosa"] and meta["versions"]["silero-vad"]
    assert set(meta["files"]) == {"white", "tone", "am"}
    row = t1.set_index("bg_id")
    assert row.loc["white", "spectral_flatness"] > 0.3 > row.loc["tone", "spectral_flatness"]
    assert row.loc["am", "rms_variance"] > 10 * row.loc["tone", "rms_variance"]   # 3 s: edge frames count

    # second call: read back, nothing recomputed, files untouched
    mtimes = (csv.stat().st_mtime_ns, side.stat().st_mtime_ns)

    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(D, "compute_descriptors", boom)
    t2 = D.descriptor_table(ws, progress=False)
    pd.testing.assert_frame_equal(t1, t2)
    assert (csv.stat().st_mtime_ns, side.stat().st_mtime_ns) == mtimes

    # overwrite, or a changed VAD threshold, recomputes everything
    calls = []
    real = D.spectral_descriptors

    def counting(y, *, sr=SR, vad_threshold=0.5, vad_model=None, name="audio"):
        calls.append(name)
        return {**real(y, sr), "vad_speech_fraction": 0.0}

    monkeypatch.setattr(D, "compute_descriptors", counting)
    D.descriptor_table(ws, overwrite=True, progress=False)
    assert len(calls) == 3
    calls.clear()
    D.descriptor_table(ws, vad_threshold=0.6, progress=False)
    assert len(calls) == 3
    assert json.loads(side.read_text())["settings"]["vad_threshold"] == 0.6

    # a re-curated WAV is recomputed alone; a new background is added
    calls.clear()
    write_wav(ws.bg / "tone.wav", _sine(f=2000.0, dur=3.0))
    write_wav(ws.bg / "extra.wav", _white(dur=3.0, seed=1))
    bat = pd.read_csv(ws.descriptors / "battery.csv")
    bat.loc[len(bat)] = {"bg_id": "extra", "category": "stationary", "path": "bg/extra.wav"}
    bat.to_csv(ws.descriptors / "battery.csv", index=False)
    t3 = D.descriptor_table(ws, vad_threshold=0.6, progress=False)
    assert sorted(c.split("bg_id ")[1].rstrip(")") for c in calls) == ["extra", "tone"]
    assert list(t3["bg_id"]) == ["white", "tone", "am", "extra"]
    assert t3.set_index("bg_id").loc["tone", "spectral_centroid"] == pytest.approx(2000, abs=50)


def test_descriptor_table_missing_battery(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    with pytest.raises(FileNotFoundError, match="battery.csv"):
        D.descriptor_table(ws, progress=False)


def test_descriptor_table_bad_battery(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    pd.DataFrame({"bg_id": ["a"]}).to_csv(ws.descriptors / "battery.csv", index=False)
    with pytest.raises(AiplibParameterError, match="path"):
        D.descriptor_table(ws, progress=False)
    pd.DataFrame({"bg_id": ["a"], "path": ["bg/a.wav"]}).to_csv(ws.descriptors / "battery.csv", index=False)
    with pytest.raises(AiplibError, match="a.wav"):
        D.descriptor_table(ws, progress=False)


def test_descriptor_table_reports_silent_share_and_keeps_na_id(tmp_path):
    """A background named NA (from NA.wav) stays "NA"; its silent frames are counted and averaged."""
    ws = workspace("demo", data_root=tmp_path)
    y = np.concatenate([np.zeros(40000, np.float32), _white(dur=2.5)])
    write_wav(ws.bg / "NA.wav", y)
    pd.DataFrame([{"bg_id": "NA", "path": "bg/NA.wav"}]).to_csv(ws.descriptors / "battery.csv", index=False)
    t = D.descriptor_table(ws, progress=False)
    assert list(t["bg_id"]) == ["NA"]
    assert t.loc[0, "silent_frame_share"] == pytest.approx(77 / 157)
    assert t.loc[0, "spectral_centroid"] == pytest.approx(2040.5, abs=1.0)
    meta = json.loads((ws.descriptors / "acoustic_descriptors.json").read_text())
    assert meta["files"]["NA"]["silent_frame_share"] == pytest.approx(77 / 157)
    assert "included" in meta["settings"]["frame"]["silent_frames"]
    t2 = D.descriptor_table(ws, progress=False)                       # read back: "NA" not NaN
    pd.testing.assert_frame_equal(t, t2)


def test_load_vad_model_without_torch_raises_the_install_line(monkeypatch):
    """No torch (nor silero-vad): MissingPackageError naming the install command, not a bare import error."""
    import builtins

    from aiplib.core.errors import MissingPackageError

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name.split(".")[0] in ("torch", "silero_vad"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    vad.load_vad_model.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(MissingPackageError, match=r"pip install silero-vad torch==2\.13\.0"):
        vad.load_vad_model()
    monkeypatch.undo()
    vad.load_vad_model.cache_clear()
