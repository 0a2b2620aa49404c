"""Background curation: loudness, looping, formats, silence, battery.csv, determinism."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyloudnorm
import pytest
import soundfile as sf

from aiplib.battery.backgrounds import TARGET_LUFS, colored_noise, curate_background, curate_battery, silent_shares
from aiplib.core.errors import AiplibParameterError, AudioFileError
from aiplib.core.workspace import workspace
from aiplib.io.audio import ClippingWarning
from aiplib.io.formats import BATTERY_COLUMNS

SR = 16000
N30 = 30 * SR



def _tone(freq, dur_s, sr, amp=0.1, seed=0):
    t = np.arange(int(round(dur_s * sr))) / sr
    noise = np.random.default_rng(seed).standard_normal(t.size) * 0.002
    return (amp * np.sin(2 * np.pi * freq * t) + noise).astype(np.float32)


def _spec(bg_id, sources, combine="concat", **kw):
    spec = dict(bg_id=bg_id, category="stationary", description=f"test {bg_id}", sources=list(sources),
                combine=combine, source_package="test", licence="CC0 1.0", attribution="pytest",
                synthetic=combine.startswith("synthetic:"))
    spec.update(kw)
    return spec


def _lufs(y, sr=SR):
    return pyloudnorm.Meter(sr).integrated_loudness(np.asarray(y, dtype=np.float64))


def _peak_hz(y, sr=SR):
    spec = np.abs(np.fft.rfft(y * np.hanning(y.size)))
    return np.fft.rfftfreq(y.size, 1 / sr)[np.argmax(spec)]


@pytest.fixture
def ws(tmp_path):
    return workspace("custom", data_root=tmp_path / "data")


def test_sine_curated_to_minus23_lufs(ws, tmp_path):
    src = tmp_path / "sine1k.wav"
    sf.write(src, _tone(1000, 5.0, SR), SR, subtype="FLOAT")
    df = curate_battery(ws, [_spec("sine", [src])])
    y, sr = sf.read(ws.root / df.path[0], dtype="float32")
    assert sr == SR and y.dtype == np.float32 and y.shape == (N30,)
    assert TARGET_LUFS == -23.0                     # the authors' BG_LUFS
    assert abs(_lufs(y) - (-23.0)) < 0.1
    assert abs(df.lufs_after[0] - (-23.0)) < 0.1
    assert df.looped[0] and abs(df.source_duration_s[0] - 5.0) < 1e-6
    assert abs(df.gain_db[0] - (-23.0 - df.lufs_before[0])) < 1e-9
    assert df.peak_after[0] == pytest.approx(np.max(np.abs(y)), abs=0.5 / 32768)  # 16-bit file
    assert sf.info(str(ws.root / df.path[0])).subtype == "PCM_16" and df.clipped_samples[0] == 0
    # the file holds 16-bit steps, read back as float
    assert np.all(y * 32768 == np.round(y * 32768))
    assert df.silent_share[0] == 0.0 and df.silent_share_1s[0] == 0.0
    assert abs(_peak_hz(y) - 1000) < 1.0


def test_short_source_is_looped_to_exactly_30_s(ws, tmp_path):
    src = tmp_path / "burst.wav"
    burst = np.random.default_rng(3).standard_normal(int(0.2 * SR)).astype(np.float32) * 0.1
    sf.write(src, burst, SR, subtype="FLOAT")
    df = curate_battery(ws, [_spec("burst", [src])])
    y, _ = sf.read(ws.root / df.path[0], dtype="float32")
    assert y.size == 30 * 16000
    n = burst.size
    np.testing.assert_array_equal(y[:n], y[n:2 * n])  # periodic: looped end to end
    assert bool(df.looped[0]) and abs(df.source_duration_s[0] - 0.2) < 1e-9
    assert abs(_lufs(y) + 23.0) < 0.1


@pytest.mark.parametrize("level", [0.0, 1e-6])
def test_silent_source_refused_naming_the_file(tmp_path, level):
    src = tmp_path / "quiet_room.wav"
    sf.write(src, np.full(SR, level, dtype=np.float32), SR, subtype="FLOAT")
    with pytest.raises(AudioFileError, match="quiet_room.wav"):
        curate_background(_spec("quiet", [src]))


def test_nan_source_refused(tmp_path):
    src = tmp_path / "broken.wav"
    y = _tone(440, 1.0, SR)
    y[100] = np.nan
    sf.write(src, y, SR, subtype="FLOAT")
    with pytest.raises(AudioFileError, match="broken.wav"):
        curate_background(_spec("nan", [src]))


def test_missing_source_names_file(tmp_path):
    with pytest.raises(AudioFileError, match="nowhere.flac"):
        curate_background(_spec("missing", [tmp_path / "nowhere.flac"]))


FORMATS = {  # name: (file name, sample rate, channels, soundfile subtype)
    "wav_stereo_44k1_24bit": ("a.wav", 44100, 2, "PCM_24"),
    "wav_int16": ("b.wav", 16000, 1, "PCM_16"),
    "flac_22k05": ("c.flac", 22050, 1, "PCM_16"),
    "ogg_48k": ("d.ogg", 48000, 1, "VORBIS"),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_source_formats(ws, tmp_path, fmt):
    name, sr, ch, subtype = FORMATS[fmt]
    y = _tone(440, 3.0, sr)
    data = np.stack([y, y], axis=1) if ch == 2 else y
    src = tmp_path / name
    sf.write(src, data, sr, subtype=subtype)
    df = curate_battery(ws, [_spec(fmt, [src])])
    out, out_sr = sf.read(ws.root / df.path[0], dtype="float32", always_2d=True)
    assert out_sr == SR and out.shape == (N30, 1)
    assert abs(_lufs(out[:, 0]) + 23.0) < 0.1
    assert abs(_peak_hz(out[:, 0]) - 440) < 1.0  # resampled, not re-pitched
    assert abs(df.source_duration_s[0] - 3.0) < 0.01


def test_battery_csv_columns_and_rows(ws, tmp_path):
    src = tmp_path / "s.wav"
    sf.write(src, _tone(300, 2.0, SR), SR)
    specs = [_spec("tone", [src]), _spec("pink", [], combine="synthetic:pink")]
    df = curate_battery(ws, specs)
    csv = pd.read_csv(ws.descriptors / "battery.csv", keep_default_na=False)
    assert list(csv.columns) == BATTERY_COLUMNS
    assert list(csv.bg_id) == ["tone", "pink"]
    assert list(csv.path) == ["bg/tone.wav", "bg/pink.wav"]
    assert list(csv.synthetic) == [False, True]
    assert csv.source_file[1] == "synthetic:pink"
    assert csv.source_file[0] == str(src.resolve())  # outside the workspace → absolute
    assert list(df.columns) == BATTERY_COLUMNS


def test_sum_combines_normalised_sources(ws, tmp_path):
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    sf.write(a, _tone(500, 4.0, SR, amp=0.3), SR)
    sf.write(b, _tone(1500, 6.0, SR, amp=0.01), SR)
    y, info = curate_background(_spec("duo", [[a], str(b)], combine="sum"))
    assert y.shape == (N30,) and abs(_lufs(y) + 23.0) < 0.1
    spec = np.abs(np.fft.rfft(y))
    f = np.fft.rfftfreq(y.size, 1 / SR)
    p500, p1500 = spec[np.argmin(abs(f - 500))], spec[np.argmin(abs(f - 1500))]
    # each source was normalised to the same loudness first: the quiet one is not drowned
    assert 0.3 < p1500 / p500 < 3.0
    assert info["source_duration_s"] == pytest.approx(4.0)


def test_start_s_skips_start_of_first_source(tmp_path):
    src = tmp_path / "two_tones.wav"
    sf.write(src, np.concatenate([_tone(440, 1.0, SR), _tone(1200, 2.0, SR)]), SR)
    y, info = curate_background(_spec("later", [src], start_s=1.0))
    assert abs(_peak_hz(y) - 1200) < 1.0 and info["source_duration_s"] == pytest.approx(2.0)


@pytest.mark.slow
def test_curation_is_deterministic(tmp_path):
    src = tmp_path / "s.flac"
    sf.write(src, _tone(700, 2.5, 22050), 22050)
    specs = [_spec("tone", [src]), _spec("white", [], combine="synthetic:white"),
             _spec("brown", [], combine="synthetic:brown")]
    ws1 = workspace("custom", data_root=tmp_path / "one")
    ws2 = workspace("custom", data_root=tmp_path / "two")
    curate_battery(ws1, specs, seed=5)
    curate_battery(ws2, specs, seed=5)
    for s in specs:
        assert (ws1.bg / f"{s['bg_id']}.wav").read_bytes() == (ws2.bg / f"{s['bg_id']}.wav").read_bytes()
    ws3 = workspace("custom", data_root=tmp_path / "three")
    curate_battery(ws3, specs[1:2], seed=6)
    assert (ws3.bg / "white.wav").read_bytes() != (ws1.bg / "white.wav").read_bytes()


@pytest.mark.slow
def test_existing_outputs_kept_missing_made(ws, tmp_path):
    src = tmp_path / "s.wav"
    sf.write(src, _tone(800, 2.0, SR), SR)
    specs = [_spec("a", [src]), _spec("b", [], combine="synthetic:white")]
    curate_battery(ws, specs)
    a_bytes, b_mtime = (ws.bg / "a.wav").read_bytes(), (ws.bg / "b.wav").stat().st_mtime_ns
    curate_battery(ws, specs)  # rebuilt with the same bytes: no file is rewritten
    assert (ws.bg / "a.wav").read_bytes() == a_bytes and (ws.bg / "b.wav").stat().st_mtime_ns == b_mtime
    marker = np.zeros(10, dtype=np.float32)
    sf.write(ws.bg / "a.wav", marker, SR, subtype="FLOAT")  # someone hand-edited it: curated again
    (ws.bg / "b.wav").unlink()
    curate_battery(ws, specs)
    assert (ws.bg / "a.wav").read_bytes() == a_bytes  # re-made, bit-identical to the first curation
    assert sf.info(ws.bg / "b.wav").frames == N30  # re-made
    sf.write(src, _tone(500, 2.0, SR), SR)  # the source file is replaced: only "a" is re-made
    b_mtime = (ws.bg / "b.wav").stat().st_mtime_ns
    bat = curate_battery(ws, specs)
    assert (ws.bg / "a.wav").read_bytes() != a_bytes and (ws.bg / "b.wav").stat().st_mtime_ns == b_mtime
    assert abs(bat.set_index("bg_id").loc["a", "lufs_after"] + 23.0) < 0.05
    curate_battery(ws, specs, duration_s=10.0)  # another duration: every background is re-made
    assert sf.info(ws.bg / "a.wav").frames == 10 * SR and sf.info(ws.bg / "b.wav").frames == 10 * SR


def test_duplicate_bg_id_rejected(ws):
    specs = [_spec("x", [], combine="synthetic:white"), _spec("x", [], combine="synthetic:pink")]
    with pytest.raises(AiplibParameterError, match="duplicate bg_id"):
        curate_battery(ws, specs)


@pytest.mark.parametrize("bad", [dict(category="noise"), dict(combine="mix"), dict(bg_id="a/b")])
def test_malformed_spec_rejected(bad):
    with pytest.raises(AiplibParameterError):
        curate_background(dict(_spec("ok", [], combine="synthetic:white"), **bad))


def test_noise_colours_order_by_spectral_slope():
    def slope(y):
        p = np.abs(np.fft.rfft(y)) ** 2
        f = np.fft.rfftfreq(y.size, 1 / SR)
        band = (f > 100) & (f < 6000)
        return np.polyfit(np.log10(f[band]), 10 * np.log10(p[band]), 1)[0]  # dB per decade

    slopes = {k: slope(colored_noise(k, N30, seed=1)) for k in ("white", "pink", "brown")}
    assert abs(slopes["white"]) < 1.0
    assert abs(slopes["pink"] + 10.0) < 1.0  # 1/f: −10 dB per decade
    assert abs(slopes["brown"] + 20.0) < 1.0  # 1/f²: −20 dB per decade


def test_silent_shares_by_hand():
    y = np.r_[np.full(SR, 0.1), np.zeros(2 * SR)].astype(np.float32)     # 1 s sound, 2 s zeros
    s = silent_shares(y)
    assert s["silent_share"] == pytest.approx(2 / 3)
    assert s["silent_share_1s"] == 16001 / 32001                       # starts 16000 … 32000 of 0 … 32000
    # isolated zero samples (and runs under 10 ms) are not silence
    z = np.full(SR, 0.1, np.float32)
    z[::100] = 0.0
    z[5000:5159] = 0.0                                                 # 159 samples < 160
    assert silent_shares(z) == {"silent_share": 0.0, "silent_share_1s": 0.0}
    z[5000:5160] = 0.0                                                 # 160 samples = 10 ms
    assert silent_shares(z)["silent_share"] == pytest.approx(160 / SR)


def test_zero_padded_clip_reports_its_silent_share(ws, tmp_path):
    """An ESC-50-like clip: 1.5 s of sound zero-padded to 5 s, tiled to 30 s (6 copies)."""
    clip = np.zeros(5 * SR, np.float32)
    clip[:int(1.5 * SR)] = _tone(700, 1.5, SR, amp=0.3)
    src = tmp_path / "1-100032-A-0.wav"
    sf.write(src, clip, SR, subtype="FLOAT")
    df = curate_battery(ws, [_spec("esc_dog", [src], category="transient")])
    y, _ = sf.read(ws.root / df.path[0], dtype="float32")
    assert df.silent_share[0] == pytest.approx(0.7, abs=1e-6)        # 3.5 s of every 5 s
    # a 1 s window is silent when it starts 1.5 … 4 s into a 5 s period: 2.5 s of 5 s, 6 periods
    # (the last period's windows stop at 29 s)
    n_win = N30 - SR + 1
    n_silent = 5 * (int(2.5 * SR) + 1) + (int(2.5 * SR) + 1)
    assert df.silent_share_1s[0] == pytest.approx(n_silent / n_win, abs=1e-6)
    csv = pd.read_csv(ws.descriptors / "battery.csv", keep_default_na=False)
    assert {"peak_after", "silent_share", "silent_share_1s"} <= set(csv.columns)
    assert abs(_lufs(y) + 23.0) < 0.1                                 # gated loudness: silence ignored


def test_clipping_background_warns_and_records_peak(ws, tmp_path):
    """Sparse clicks at -23 LUFS peak far above full scale: warned, recorded, and clipped at full
    scale in the 16-bit file, as the authors' sf.write did."""
    clicks = np.zeros(SR, np.float32)
    clicks[::4000] = 0.5
    src = tmp_path / "clock.wav"
    sf.write(src, clicks + _tone(1000, 1.0, SR, amp=1e-4), SR, subtype="FLOAT")
    with pytest.warns(ClippingWarning, match="clock"):
        df = curate_battery(ws, [_spec("clock", [src], category="transient")])
    y, _ = sf.read(ws.root / df.path[0], dtype="float32")
    assert df.peak_after[0] > 3.0 and np.max(np.abs(y)) == pytest.approx(1.0, abs=1 / 32768)
    # 4 clicks per second of source, looped to 30 s: 120 samples above full scale, all clipped
    assert df.clipped_samples[0] == 4 * 30 == np.count_nonzero(np.abs(y) >= 32767 / 32768)


def test_old_minus30_battery_is_recurated(ws, tmp_path):
    """A battery.csv from before (-30 LUFS, no peak/silence columns) is re-made, WAV included."""
    src = tmp_path / "s.wav"
    sf.write(src, _tone(800, 2.0, SR), SR)
    specs = [_spec("a", [src])]
    curate_battery(ws, specs, target_lufs=-30.0)
    old = pd.read_csv(ws.descriptors / "battery.csv")
    old.drop(columns=["peak_after", "silent_share", "silent_share_1s"]).to_csv(
        ws.descriptors / "battery.csv", index=False)
    df = curate_battery(ws, specs)
    y, _ = sf.read(ws.bg / "a.wav", dtype="float32")
    assert abs(_lufs(y) + 23.0) < 0.1 and abs(df.lufs_after[0] + 23.0) < 0.1
    assert list(df.columns) == BATTERY_COLUMNS
    curate_battery(ws, specs, target_lufs=-30.0)                      # target changed: re-made
    y, _ = sf.read(ws.bg / "a.wav", dtype="float32")
    assert abs(_lufs(y) + 30.0) < 0.1
