"""The embedded ``demo`` profile: Debian package checks, stage 1–2, the battery specs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyloudnorm
import pytest
import soundfile as sf

from aiplib.core.errors import MissingPackageError
from aiplib.core.tasks import KEYWORDS
from aiplib.core.workspace import workspace
from aiplib.sources.corpora import debian, demo
from aiplib.sources.corpora.asterisk_langs import read_transcripts

ASR_FIELDS = {"item_id", "path", "source_file", "source", "licence", "attribution", "duration_s",
              "speaker", "accent_group", "synthetic", "text"}
KWS_FIELDS = ASR_FIELDS - {"text"} | {"label", "is_target"}
SIZES = dict(n_asr_real=4, n_asr_synth=5, n_kws_target=6, n_kws_nontarget=3)


# --------------------------------------------------------------------------- Debian checks
def test_missing_package_message_names_package_and_command(monkeypatch):
    monkeypatch.setattr(debian, "installed", lambda p: p not in ("minetest-data", "flite"))
    with pytest.raises(MissingPackageError) as exc:
        debian.ensure_packages(demo.DEBIAN_PACKAGES, install=False)
    msg = str(exc.value)
    assert "minetest-data" in msg and "flite" in msg and "sonic-pi-samples" not in msg
    assert "sudo apt-get install -y --no-install-recommends flite minetest-data" in msg


def test_ensure_packages_without_install_raises(monkeypatch, tmp_path):
    monkeypatch.setattr(debian, "installed", lambda p: p != "sonic-pi-samples")
    with pytest.raises(MissingPackageError, match="apt-get install -y --no-install-recommends sonic-pi-samples"):
        debian.ensure_packages(["sonic-pi-samples", "ffmpeg"], install=False)
    with pytest.raises(MissingPackageError, match="sonic-pi-samples"):
        demo.gather_raw(workspace("demo", data_root=tmp_path), install=False)


def test_ensure_packages_all_present(monkeypatch):
    monkeypatch.setattr(debian, "installed", lambda p: True)
    assert debian.ensure_packages(["anything"], install=True) == []


def test_installed_false_for_unknown_package():
    assert debian.installed("no-such-package-aiplib-test") is False


def test_transcript_parser(tmp_path):
    p = tmp_path / "core-sounds-en.txt"
    p.write_text("; comment\n\nagent-pass: Please enter your  password.\ndigits/7: seven\n")
    assert read_transcripts(p) == {"agent-pass": "Please enter your password.", "digits/7": "seven"}


# --------------------------------------------------------------------------- stage 1–2
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not all(debian.installed(p) for p in demo.DEBIAN_PACKAGES):
        pytest.skip("demo Debian packages not installed")
    ws = workspace("demo", data_root=tmp_path_factory.mktemp("demo_a"))
    inv = demo.gather_raw(ws)
    banks = demo.build_item_banks(ws, **SIZES)
    return ws, inv, banks


@pytest.mark.slow
def test_stage_1_records_the_debian_packages_of_the_inputs(built):
    """raw/debian_packages.csv: every inventory package, the engines and their same-source
    libraries, each with dpkg-query's version and the archive's .deb SHA-256 (apt-cache show)."""
    import re
    import subprocess

    ws, inv, _ = built
    table = pd.read_csv(ws.debian_packages_csv, dtype=str, keep_default_na=False)
    assert list(table.columns) == debian.PACKAGE_COLUMNS and table["package"].is_unique
    assert set(inv.package) | set(demo.DEBIAN_PACKAGES) <= set(table["package"])
    assert {"espeak-ng-data", "libespeak-ng1", "libflite1"} <= set(table["package"])
    assert any(p.startswith("libavcodec") for p in table["package"])
    espeak = table.set_index("package").loc["espeak-ng"]
    dpkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "espeak-ng"], capture_output=True,
                          text=True, timeout=60, check=True).stdout
    assert espeak["version"] == dpkg and espeak["status"] == "installed"
    assert re.fullmatch(r"[0-9a-f]{64}", espeak["deb_sha256"])
    shown = subprocess.run(["apt-cache", "show", f"espeak-ng={dpkg}"], capture_output=True,
                           text=True, timeout=60, check=False).stdout
    if "SHA256: " in shown:
        assert espeak["sha256_source"] == "apt-cache show"
        assert f"SHA256: {espeak['deb_sha256']}" in shown


@pytest.mark.slow
def test_inventory(built):
    ws, inv, _ = built
    assert list(inv.columns) == ["file", "package", "licence", "attribution", "bytes"]
    assert set(inv.package) <= set(demo.DEBIAN_PACKAGES)
    assert all((ws.root / f).is_file() for f in inv.file)
    assert (inv.bytes > 0).all() and inv.file.is_unique
    assert (ws.raw / "inventory.csv").is_file()
    assert inv.file.str.endswith("core-sounds-en.txt.gz").sum() == 1
    assert inv.file.str.endswith(".g722").sum() > 500  # the Asterisk prompts
    again = demo.gather_raw(ws)  # idempotent
    pd.testing.assert_frame_equal(inv, again)


def test_item_bank_counts_fields_ids(built):
    ws, _, banks = built
    asr, kws = banks["asr"], banks["kws"]
    assert len(asr) == SIZES["n_asr_real"] + SIZES["n_asr_synth"]
    assert len(kws) == SIZES["n_kws_target"] + SIZES["n_kws_nontarget"]
    assert (~asr.synthetic).sum() == SIZES["n_asr_real"] and asr.synthetic.sum() == SIZES["n_asr_synth"]
    assert kws.is_target.sum() == SIZES["n_kws_target"]
    for fam, fields in (("asr", ASR_FIELDS), ("kws", KWS_FIELDS)):
        lines = (ws.itembanks / f"{fam}.jsonl").read_text().splitlines()
        assert all(set(json.loads(line)) == fields for line in lines)
    ids = list(asr.item_id) + list(kws.item_id)
    assert len(ids) == len(set(ids))


def test_item_audio_matches_bank(built):
    ws, _, banks = built
    for df in banks.values():
        for r in df.itertuples():
            y, sr = sf.read(ws.path(r.path), dtype="float32", always_2d=True)
            assert sr == 16000 and y.shape[1] == 1 and sf.info(ws.path(r.path)).subtype == "FLOAT"
            assert y.shape[0] / sr == pytest.approx(r.duration_s)
            assert np.abs(y).max() > 0.01


def test_real_asr_items(built):
    _, _, banks = built
    real = banks["asr"][~banks["asr"].synthetic]
    assert real.duration_s.between(2.0, 10.0).all()
    assert (real.text.str.split().str.len() >= 5).all()
    assert (real.licence == "CC BY-SA 3.0").all() and real.attribution.str.contains("Allison Smith").all()
    assert set(real.speaker) == {"asterisk_allison"}


def test_synthetic_asr_voices_round_robin(built):
    _, _, banks = built
    synth = banks["asr"][banks["asr"].synthetic]
    assert list(synth.accent_group) == list(demo.ASR_VOICES[:SIZES["n_asr_synth"]])
    assert synth.text.isin(demo.HARVARD_SENTENCES).all() and synth.text.is_unique
    assert synth.source.str.contains("synthetic voice").all()


def test_kws_items(built):
    _, _, banks = built
    kws = banks["kws"]
    assert kws.speaker.nunique() >= min(10, len(kws))
    assert (kws.is_target == kws.label.isin(KEYWORDS)).all()
    assert set(kws.label[kws.is_target]) == set(KEYWORDS[:SIZES["n_kws_target"]])
    assert (kws.duration_s >= 1.0).all()


@pytest.mark.slow
def test_same_seed_same_files_other_seed_differs(built, tmp_path):
    ws, _, _ = built
    ws2 = workspace("demo", data_root=tmp_path / "b")
    demo.gather_raw(ws2)
    demo.build_item_banks(ws2, **SIZES)
    for fam in ("asr", "kws"):
        assert (ws.itembanks / f"{fam}.jsonl").read_bytes() == (ws2.itembanks / f"{fam}.jsonl").read_bytes()
    wavs = sorted(p.relative_to(ws.root) for p in (ws.itembanks / "audio").rglob("*.wav"))
    assert wavs == sorted(p.relative_to(ws2.root) for p in (ws2.itembanks / "audio").rglob("*.wav"))
    assert all((ws.root / w).read_bytes() == (ws2.root / w).read_bytes() for w in wavs)
    other = demo.build_item_banks(ws2, **SIZES, seed=7, overwrite=True)
    assert set(other["asr"].item_id) != set(demo.build_item_banks(ws, **SIZES)["asr"].item_id)


def test_existing_item_banks_kept(built):
    ws, _, banks = built
    path = ws.itembanks / "asr.jsonl"
    mtime = path.stat().st_mtime_ns
    again = demo.build_item_banks(ws, **SIZES)
    assert path.stat().st_mtime_ns == mtime
    pd.testing.assert_frame_equal(again["asr"], banks["asr"])


def _flat(sources):
    for s in sources:
        yield from (_flat(s) if isinstance(s, list) else [s])


def test_battery_specs(built):
    ws, _, banks = built
    specs = demo.battery_specs(ws)
    assert len(specs) == 20 and len({s["bg_id"] for s in specs}) == 20
    real = [s for s in specs if not s["synthetic"]]
    assert len(real) >= 14 and sum(s["synthetic"] for s in specs) <= 3
    assert {s["category"] for s in specs} == {"stationary", "transient", "music", "speech-like"}
    for s in specs:
        assert s["licence"] and s["attribution"] and s["description"]
        for p in _flat(s["sources"]):
            assert ws.path(p).is_file(), p
    item_files = {str(ws.path(f)) for f in banks["asr"].source_file}
    speech = [s for s in specs if s["category"] == "speech-like"]
    assert {s["combine"] for s in speech} == {"sum"}
    used = [p for s in speech for p in _flat(s["sources"])]
    assert not item_files & set(used) and len(used) == len(set(used))
    assert sorted(len(s["sources"]) for s in speech) == [2, 6]


@pytest.mark.slow
def test_demo_battery_curates(built):
    from aiplib.battery.backgrounds import curate_battery

    ws, _, _ = built
    df = curate_battery(ws, demo.battery_specs(ws))
    assert len(df) == 20 and df.lufs_after.between(-23.1, -22.9).all()
    meter = pyloudnorm.Meter(16000)
    for p, n_clip in zip(df.path, df.clipped_samples):
        y, sr = sf.read(ws.path(p), dtype="float64")
        assert sr == 16000 and y.shape == (480000,) and sf.info(str(ws.path(p))).subtype == "PCM_16"
        if n_clip:   # 16-bit as the authors': what exceeded full scale is clipped, a little quieter
            assert -24.0 < meter.integrated_loudness(y) < -23.0 and np.max(np.abs(y)) <= 1.0
        else:
            assert abs(meter.integrated_loudness(y) + 23.0) < 0.1
    assert ((df.clipped_samples > 0) == (df.peak_after > 1.0)).all()
