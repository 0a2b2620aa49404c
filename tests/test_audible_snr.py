"""The SNR label is what the model hears (issue #37): a background with a 15 Hz rumble, a speech file
with a DC offset, a keyword clip with 2 s of leading silence, a clipped utterance and a WAV cut
short — real files through the custom profile's validation, stage 2, curation, manifests and the
mixer; the tests measure the mixture.

"Audible" is notebook 06's measure (``checks.subaudible_backgrounds``): the power in the DFT bins at
or above 20 Hz. The audible SNR of a stimulus is 10·log10 of the speech part's audible power over
the background part's, both as they are in the mixture (``mix_row``), computed here with numpy.
"""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from test_custom import make_inputs, voice_like, write

from aiplib.battery.backgrounds import curate_background, curate_battery
from aiplib.core.errors import AudioFileError, ValidationError
from aiplib.core.workspace import workspace
from aiplib.io.audio import SR
from aiplib.io.formats import read_manifest
from aiplib.sources.corpora import custom
from aiplib.stimuli import checks
from aiplib.stimuli.manifests import build_manifests
from aiplib.stimuli.mixing import mix_row


def audible_power(x, lo_hz: float = 20.0) -> float:
    """Mean power of ``x`` in the DFT bins at or above ``lo_hz`` (Parseval, one-sided)."""
    x = np.asarray(x, dtype=np.float64)
    spec = np.abs(np.fft.rfft(x)) ** 2
    spec[1:] *= 2.0
    if x.size % 2 == 0:
        spec[-1] /= 2.0
    f = np.fft.rfftfreq(x.size, 1.0 / SR)
    return float(spec[f >= lo_hz].sum() / x.size**2)


def audible_snr(parts, a: int = 0, b: int | None = None) -> float:
    """Audible SNR (dB) of a ``mix_row`` result over samples ``[a, b)``."""
    s = parts["speech"][a:b]
    n = parts["background"][a:b]
    return 10 * np.log10(audible_power(s) / audible_power(n))


def _rumble(seconds: float, hz: float, seed: int = 3) -> np.ndarray:
    """Quiet white noise (0.005 RMS) under a 0.5-amplitude sine at ``hz``: 37 dB of sub-audible
    rumble over the audible part when ``hz`` < 20."""
    t = np.arange(int(seconds * SR)) / SR
    return (0.005 * np.random.default_rng(seed).standard_normal(t.size) + 0.5 * np.sin(2 * np.pi * hz * t)).astype(
        np.float32)


def _pipeline(tmp_path, params):
    """Stages 1, 2, 3 and 5 of the custom profile on ``params``; returns the workspace."""
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        custom.gather_raw(ws, **params)
    custom.build_item_banks(ws, seed=0)
    curate_battery(ws, custom.battery_specs(ws), duration_s=4.0)
    build_manifests(ws)
    return ws


def _rows(ws, family, **match):
    man = read_manifest(ws, family)
    for k, v in match.items():
        man = man[man[k] == v]
    return man.to_dict("records")


def _problems(report, name):
    return {p.kind: p for p in report.problems if p.file.rsplit("/", 1)[-1] == name}


@pytest.mark.slow
def test_15hz_rumble_background_is_high_passed_steeply_and_heard_at_its_label(tmp_path):
    params = make_inputs(tmp_path / "in")
    write(tmp_path / "in" / "bg" / "rumble.wav", _rumble(3.0, 15.0), subtype="FLOAT")
    ws = _pipeline(tmp_path, params)
    rows = _rows(ws, "asr", background_id="rumble")
    for snr in (10, 5, 0):  # before: +17 dB above the label (order 4 took 21 dB off at 15 Hz)
        for r in [x for x in rows if x["snr_db"] == snr]:
            assert audible_snr(mix_row(r, ws)) == pytest.approx(snr, abs=0.5)
    battery = pd.read_csv(ws.battery_csv).set_index("bg_id")
    assert bool(battery.loc["rumble", "subaudible_removed"]) and battery.loc["rumble", "clipped_samples"] == 0
    curated = sf.read(str(ws.path(battery.loc["rumble", "path"])), dtype="float64")[0]
    assert audible_power(curated) / np.mean(curated**2) > 0.99
    warn = _problems(custom.validate_inputs(**params), "rumble.wav")["subaudible"]
    assert warn.severity == "warning" and "order 16" in warn.message
    # stage 6 sees no excess for it, and Table 3's column comes from there
    t = checks.subaudible_backgrounds(ws).set_index("bg_id")
    assert t.loc["rumble", "audible_snr_excess_db"] < 0.05


def test_rumble_no_high_pass_takes_out_is_refused_with_the_measured_numbers(tmp_path):
    params = make_inputs(tmp_path / "in")
    src = write(tmp_path / "in" / "bg" / "rumble19.wav", _rumble(3.0, 19.0), subtype="FLOAT")
    report = custom.validate_inputs(**params)
    fatal = _problems(report, "rumble19.wav")["subaudible"]
    assert fatal.severity == "fatal" and not report.ok
    # the measured shares (dB re the file's power) and the excess: 37 dB of 19 Hz rumble, 15.8 dB off
    assert ("energy below 20 Hz -0.0 dB re the file's power; -0.0 dB is still there after a zero-phase 20 Hz "
            "high-pass of order 16, so the audible SNR of its stimuli would be 21.") in fatal.message
    assert "dB above the nominal one" in fatal.message
    assert "rumble19.wav" not in " ".join(b["file"] for b in report.backgrounds)
    spec = dict(bg_id="r19", category="stationary", description="d", sources=[str(src)], combine="concat",
                source_package="user", licence="CC0", attribution="me", synthetic=False, subaudible="remove")
    with pytest.raises(AudioFileError, match=r"r19: -0\.0 dB of its power is DC or below 20 Hz and -[0-9.]+ dB is "
                                             r"still there .* order 16.* dB above the nominal one"):
        curate_background(spec, duration_s=3.0)


def test_speech_with_a_dc_offset_is_warned_about_and_heard_at_its_label(tmp_path):
    params = make_inputs(tmp_path / "in")
    v = voice_like(1.5) * (np.arange(int(1.5 * SR)) % 4000 < 500)  # 31 ms "syllables" every 250 ms
    write(tmp_path / "in" / "speech" / "a.wav", (0.5 * v / np.max(np.abs(v)) + 0.1).astype(np.float32),
          subtype="FLOAT")  # 0.5 peak + 0.1: the offset holds 2/3 of the power
    ws = _pipeline(tmp_path, params)
    rows = _rows(ws, "asr", speech_id="a")
    noisy = [r for r in rows if r["condition"] != "clean"]
    assert noisy
    for r in noisy:  # before: 5.0 / 0.0 / -5.0 dB audible at 10 / 5 / 0
        assert audible_snr(mix_row(r, ws)) == pytest.approx(float(r["snr_db"]), abs=0.5)
    warn = _problems(custom.validate_inputs(**params), "a.wav")["subaudible"]
    assert warn.severity == "warning" and warn.message.startswith("utterance: DC offset ")
    assert "stage 2 removes them" in warn.message
    bank = sf.read(str(ws.itembanks / "audio" / "asr" / "a.wav"), dtype="float64")[0]
    assert abs(bank.mean()) < 0.01 * np.sqrt(np.mean(bank**2))  # the offset was 0.1 on a 0.5 peak


def test_a_clipped_utterance_gets_a_note(tmp_path):
    params = make_inputs(tmp_path / "in")
    v = voice_like(1.5) / 0.3  # peak 1
    write(tmp_path / "in" / "speech" / "a.wav", np.clip(2.5 * v, -0.99, 0.99).astype(np.float32), subtype="FLOAT")
    report = custom.validate_inputs(**params)
    note = _problems(report, "a.wav")["clipped"]
    assert note.severity == "warning" and report.ok
    share = float(note.message.split("clipped: ")[1].split(" %")[0])
    assert 20 < share < 80
    assert ("clipped", "b.flac") not in {(p.kind, p.file.rsplit("/", 1)[-1]) for p in report.problems}
    assert "clipped" in next(r["note"] for r in report.speech if r["file"].endswith("a.wav"))


@pytest.mark.slow
def test_keyword_clip_with_2_s_of_leading_silence_is_mixed_at_its_label_over_the_word(tmp_path):
    params = make_inputs(tmp_path / "in")
    word = voice_like(1.0, seed=4)
    quiet = (1e-4 * np.random.default_rng(5).standard_normal(2 * SR)).astype(np.float32)
    write(tmp_path / "in" / "kws" / "yes.wav", np.r_[quiet, word].astype(np.float32), subtype="FLOAT")
    ws = _pipeline(tmp_path, params)
    steady = {f"noise_{j}" for j in (0, 2, 4, 6, 8)}  # the odd ones have loud bursts: not over any 1 s
    for r in _rows(ws, "kws", speech_id="yes"):
        if r["condition"] == "clean" or r["background_id"] not in steady:
            continue
        parts = mix_row(r, ws)
        assert len(parts["speech"]) == 3 * SR  # not trimmed
        # the word (its 1 s) hears the label's SNR; the whole clip is 4.8 dB below it
        assert audible_snr(parts, 2 * SR) == pytest.approx(float(r["snr_db"]), abs=0.5)
        assert audible_snr(parts) == pytest.approx(float(r["snr_db"]) - 4.8, abs=0.5)
        assert parts["info"].achieved_snr_db == pytest.approx(float(r["snr_db"]), abs=1e-3)
    # a 1 s clip keeps the authors' whole-clip SNR
    other = next(r for r in _rows(ws, "kws", speech_id="go") if r["condition"] != "clean")
    s, b = (mix_row(other, ws)[k].astype(np.float64) for k in ("speech", "background"))
    assert 10 * np.log10(np.sum(s**2) / np.sum(b**2)) == pytest.approx(float(other["snr_db"]), abs=1e-3)
    # stage 6 measures the SNR where the mixer set it: within its 0.1 dB tolerance
    presence = checks.background_presence(ws, max_items=5)
    assert presence["max_abs_error_db"].max() < 0.01
    # the paper profile keeps the authors' whole-clip SNR for the same clip
    paper = workspace("paper", data_root=tmp_path / "paper", create=False)
    shutil.copytree(ws.root, paper.root)
    r = next(x for x in _rows(ws, "kws", speech_id="yes") if x["snr_db"] == 0)
    s, b = (mix_row(r, paper)[k].astype(np.float64) for k in ("speech", "background"))
    assert 10 * np.log10(np.sum(s**2) / np.sum(b**2)) == pytest.approx(0.0, abs=1e-3)
    note = _problems(custom.validate_inputs(**params), "yes.wav")["active_part"]
    assert note.severity == "warning" and "sets its SNR over the active part 1.9" in note.message


def test_a_wav_cut_short_is_refused_naming_both_durations(tmp_path):
    params = make_inputs(tmp_path / "in")
    path = write(tmp_path / "in" / "speech" / "a.wav", voice_like(3.13), subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[: 44 + int(1.56 * SR) * 2 + 10])  # header + 1.56 s of the 3.13 s
    report = custom.validate_inputs(**params)
    cut = _problems(report, "a.wav")["truncated"]
    assert cut.severity == "fatal" and not report.ok
    assert "the WAV header declares 3.13 s of audio but only 1.56 s are in the file" in cut.message
    assert "recogniser deletions" in cut.message
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.raises(ValidationError, match="truncated"):
        custom.gather_raw(ws, **params)
