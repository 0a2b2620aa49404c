"""aiplib.corpora.paper: stage 1–3 of the ``paper`` profile on fake corpora served on 127.0.0.1.

The fake archives (tests/fake_corpora.py) have each corpus's real folder layout and metadata files;
the Common Voice path uses a fake record stream, never the hub.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from aiplib import download as dl
from aiplib.corpora import paper
from aiplib.workspace import workspace
from fake_corpora import build_archives, closed_port_url, fake_cv_records, fake_registry, serve_corpora

ARCH_FIELDS = {"item_id", "path", "source_file", "source", "licence", "attribution", "duration_s", "speaker",
               "accent_group", "synthetic"}


@pytest.fixture(scope="module")
def archives():
    return build_archives()


@pytest.fixture(scope="module")
def server(archives):
    srv = serve_corpora(archives)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def registry(archives):
    return fake_registry(archives)


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path_factory):
    monkeypatch.setattr(dl, "RETRY_WAIT_S", 0.0)
    for v in [v for v in list(os.environ) if v.startswith("AIP_MIRROR")]:
        monkeypatch.delenv(v)
    cache = tmp_path_factory.getbasetemp() / "cache"
    for v in ("HF_HOME", "TORCH_HOME", "HF_DATASETS_CACHE"):
        monkeypatch.setenv(v, str(cache / v))


@pytest.fixture(scope="module")
def paper_ws(tmp_path_factory, server, registry):
    """A paper workspace after stage 1 from the fake server (downloaded once per module)."""
    ws = workspace("paper", data_root=tmp_path_factory.mktemp("data"))
    mp = pytest.MonkeyPatch()
    mp.setattr(dl, "RETRY_WAIT_S", 0.0)
    try:
        paper.download_all(ws, base_urls=server.url, registry=registry, progress=False)
    finally:
        mp.undo()
    return ws


# ------------------------------------------------------------------------------------------------
# stage 1
# ------------------------------------------------------------------------------------------------
def _audio_files(folder: Path):
    return sorted(p for p in folder.rglob("*") if p.suffix in (".wav", ".flac"))


def test_download_all_layout_and_counts(paper_ws, archives):
    exp = archives["_expected"]
    root = paper_ws.root
    esc = root / "backgrounds/esc50"
    assert (esc / "master.zip").is_file() and (esc / "ESC-50-master/meta/esc50.csv").is_file()
    assert len(_audio_files(esc / "ESC-50-master/audio")) == exp["esc50"]
    snsd = root / "backgrounds/ms_snsd"
    assert (snsd / "master.zip").is_file() and len(_audio_files(snsd / "MS-SNSD-master")) == exp["ms_snsd"]
    assert sf.info(str(root / "backgrounds/noisex92/babble.wav")).samplerate == 19980
    musan = root / "backgrounds/musan"
    assert (musan / "musan.tar.gz").is_file() and len(_audio_files(musan / "musan")) == exp["musan"]
    assert (musan / "musan/music/fma/LICENSE").is_file()
    ls = root / "speech_asr/librispeech"
    assert {p.name for p in ls.glob("*.tar.gz")} == {"test-clean.tar.gz", "test-other.tar.gz"}
    assert len(list((ls / "LibriSpeech").rglob("*.flac"))) == exp["librispeech"]
    assert len(list((ls / "LibriSpeech").rglob("*.trans.txt"))) == 8
    sc = root / "kws/speech_commands"
    assert (sc / "speech_commands_v0.02.tar.gz").is_file()
    assert (sc / "speech_commands_v0.02/testing_list.txt").is_file()
    assert len(_audio_files(sc / "speech_commands_v0.02")) == exp["speech_commands"]
    # progress file: one complete entry per file, with the SHA-256 recorded
    prog = json.loads((root / "checks/download_progress.json").read_text())["files"]
    assert set(prog) == {"esc50/master.zip", "ms_snsd/master.zip", "noisex92/babble.wav", "musan/musan.tar.gz",
                         "librispeech/test-clean.tar.gz", "librispeech/test-other.tar.gz",
                         "speech_commands/speech_commands_v0.02.tar.gz"}
    assert all(e["status"] == "complete" and len(e["sha256"]) == 64 for e in prog.values())
    assert prog["librispeech/test-clean.tar.gz"]["verified_by"] == "md5"
    assert prog["speech_commands/speech_commands_v0.02.tar.gz"]["verified_by"] == "sha256"
    assert prog["esc50/master.zip"]["verified_by"] == "size"


def test_second_run_skips_everything(paper_ws, server, registry):
    n = len(server.log)
    paper.download_all(paper_ws, base_urls=server.url, registry=registry, progress=False)
    assert len(server.log) == n


def test_offline_run_names_url_says_mirror_and_loses_nothing(paper_ws, registry):
    """`make 01 PROFILE=paper` without network: a clear error, and nothing already there is lost."""
    root = paper_ws.root
    before = {p: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    prog_before = (root / "checks/download_progress.json").read_text()
    dead = closed_port_url()
    with pytest.raises(dl.DownloadError) as exc:
        # force: pretend nothing is complete, so every corpus must reach the (dead) server
        paper.download_all(paper_ws, base_urls=dead, registry=registry, force_download=True,
                           retries=0, progress=False)
    msg = str(exc.value)
    assert f"{dead}/librispeech/test-clean.tar.gz" in msg and f"{dead}/esc50/master.zip" in msg
    assert "AIP_MIRROR_LIBRISPEECH" in msg and "make 01 PROFILE=paper MIRROR=" in msg
    after = {p: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    assert all(after.get(p) == s for p, s in before.items())
    assert (root / "checks/download_progress.json").read_text() == prog_before


def test_default_urls_fail_clearly_without_network(tmp_path, monkeypatch):
    """The real publisher URLs are used by default; here they are unreachable (or refused)."""
    import requests

    def no_network(*a, **k):
        raise requests.ConnectionError("network is unreachable")

    monkeypatch.setattr(requests.Session, "get", no_network)
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(dl.DownloadError) as exc:
        paper.download_all(ws, corpora=["musan"], retries=0, progress=False)
    assert "https://www.openslr.org/resources/17/musan.tar.gz" in str(exc.value)
    assert "AIP_MIRROR_MUSAN" in str(exc.value)


def test_mirror_environment_variables(tmp_path, server, registry, monkeypatch):
    ws = workspace("paper", data_root=tmp_path)
    monkeypatch.setenv("AIP_MIRROR_NOISEX92", f"{server.url}/noisex92/")
    assert paper.base_url_for("noisex92") == f"{server.url}/noisex92"
    paper.download_all(ws, corpora=["noisex92"], registry=registry, progress=False)
    assert (ws.root / "backgrounds/noisex92/babble.wav").is_file()
    monkeypatch.delenv("AIP_MIRROR_NOISEX92")
    monkeypatch.setenv("AIP_MIRROR", server.url)
    assert paper.base_url_for("esc50") == f"{server.url}/esc50"
    assert paper.base_url_for("esc50", {"esc50": "http://x/y/"}) == "http://x/y"
    monkeypatch.delenv("AIP_MIRROR")
    assert paper.base_url_for("esc50") == "https://github.com/karoldvl/ESC-50/archive"
    with pytest.raises(KeyError, match="valid names"):
        paper.base_url_for("timit")


def test_checksum_mismatch_names_the_file(tmp_path, server, registry):
    bad = dict(registry)
    c = bad["librispeech"]
    bad["librispeech"] = dataclasses.replace(
        c, files=(dataclasses.replace(c.files[0], md5="0" * 32),) + c.files[1:])
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(dl.ChecksumError, match=r"test-clean\.tar\.gz.*MD5"):
        paper.download_all(ws, corpora=["librispeech"], base_urls=server.url, registry=bad, progress=False)
    assert not (ws.root / "speech_asr/librispeech/LibriSpeech/test-clean").exists()


def test_unsafe_corpus_archive_is_refused(tmp_path, archives, registry):
    from fake_corpora import FakeServer, make_targz

    evil = make_targz({"musan/README": b"x", "../../escaped.txt": b"owned"})
    reg = dict(registry)
    reg["musan"] = dataclasses.replace(reg["musan"], files=(paper.RemoteFile("musan.tar.gz"),))
    ws = workspace("paper", data_root=tmp_path / "data")
    with FakeServer({"/musan/musan.tar.gz": evil}) as srv:
        with pytest.raises(dl.UnsafeArchiveError, match=r"\.\./\.\./escaped\.txt"):
            paper.download_all(ws, corpora=["musan"], base_urls=srv.url, registry=reg, progress=False)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (ws.root / "backgrounds/musan/musan").exists()


def test_disk_space_shortage_is_reported_in_gb(tmp_path, server, registry, monkeypatch):
    monkeypatch.setattr(dl, "_free_bytes", lambda p: 10_000)
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(dl.InsufficientDiskSpaceError, match=r"musan\.tar\.gz.*needs \d+\.\d\d GB"):
        paper.download_all(ws, corpora=["musan"], base_urls=server.url, registry=registry, progress=False)
    assert not (ws.root / "backgrounds/musan/musan.tar.gz").exists()


def test_switching_to_a_mirror_keeps_completed_files(paper_ws, registry, archives):
    from fake_corpora import serve_corpora

    with serve_corpora(archives) as other:  # same bytes, another URL
        paper.download_all(paper_ws, base_urls=other.url, registry=registry, progress=False)
        assert other.log == []


def test_cli_offline_exit_status(tmp_path, capsys):
    rc = paper.main(["download", "--corpus", "noisex92", "--base-url", closed_port_url(),
                     "--data-root", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "noisex92/babble.wav" in err and "AIP_MIRROR_NOISEX92" in err


# ------------------------------------------------------------------------------------------------
# stage 2
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def banks(paper_ws):
    return paper.build_item_banks(paper_ws, seed=7, cv_dataset=fake_cv_records())


def test_item_bank_counts_and_fields(paper_ws, banks):
    asr, kws = banks["asr"], banks["kws"]
    assert len(asr) == 180 and asr.item_id.is_unique
    assert (asr.source == "LibriSpeech test-clean").sum() == 50
    assert (asr.source == "LibriSpeech test-other").sum() == 50
    cv = asr[asr.source.str.startswith("Common Voice")]
    assert len(cv) == 80
    assert cv.accent_group.nunique() == 11
    assert Counter(cv.accent_group) == Counter(paper.CV_ALLOCATION)
    assert len(kws) == 113 and kws.item_id.is_unique
    assert kws.is_target.sum() == 100 and (~kws.is_target).sum() == 13
    tgt = kws[kws.is_target]
    assert Counter(tgt.label) == {k: 10 for k in paper.KEYWORDS}
    assert all(g.speaker.is_unique for _, g in tgt.groupby("label"))
    assert kws[~kws.is_target].label.is_unique
    for fam in ("asr", "kws"):
        rows = [json.loads(x) for x in (paper_ws.itembanks / f"{fam}.jsonl").read_text().splitlines()]
        extra = {"text"} if fam == "asr" else {"label", "is_target"}
        assert all(set(r) == ARCH_FIELDS | extra for r in rows)
        for r in rows[:3] + rows[-3:]:
            info = sf.info(str(paper_ws.path(r["path"])))
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "FLOAT")
            assert r["path"] == f"itembanks/audio/{fam}/{r['item_id']}.wav"
            assert paper_ws.path(r["source_file"]).is_file()
            assert r["synthetic"] is False
    # only the kept Common Voice clips are saved, as originals
    saved = sorted((paper_ws.root / "speech_asr/common_voice").iterdir())
    assert len(saved) == 80
    assert {paper_ws.rel(p) for p in saved} == set(cv.source_file)
    # LibriSpeech durations respect the limits (the 0.5 s decoys are left out)
    assert asr[asr.source.str.startswith("LibriSpeech")].duration_s.min() >= 1.0


def test_item_banks_are_seeded_and_reused(paper_ws, banks):
    again = paper.build_item_banks(paper_ws, seed=7, cv_dataset=[])  # read back, not rebuilt
    assert list(again["asr"].item_id) == list(banks["asr"].item_id)
    other = paper.build_item_banks(paper_ws, seed=8, cv_dataset=fake_cv_records(), overwrite=True)
    assert set(other["kws"].item_id) != set(banks["kws"].item_id)
    same = paper.build_item_banks(paper_ws, seed=7, cv_dataset=fake_cv_records(), overwrite=True)
    assert list(same["asr"].item_id) == list(banks["asr"].item_id)
    assert list(same["kws"].item_id) == list(banks["kws"].item_id)


def test_common_voice_shortfall_is_a_clear_error(tmp_path):
    recs = fake_cv_records(per_group=9, skip_groups=("Philippines",))
    with pytest.raises(paper.CorpusError, match=r"Philippines: 0 usable clip\(s\), 7 needed"):
        paper.select_common_voice(recs, tmp_path / "cv", seed=0)
    assert not (tmp_path / "cv").exists()  # nothing saved when the selection cannot be made


def test_common_voice_filters_and_accent_mapping(tmp_path):
    assert paper.accent_group("India and South Asia (India, Pakistan, Sri Lanka)") == "India and South Asia"
    assert paper.accent_group("Southern African (South Africa, Zimbabwe, Namibia)") == "Southern Africa"
    assert paper.accent_group("Hong Kong English") == "Hong Kong, Singapore and Malaysia"
    assert paper.accent_group("United States English|England English") is None   # two groups
    assert paper.accent_group("German English,Non native speaker") is None
    assert paper.accent_group(None) is None
    kept = paper.select_common_voice(fake_cv_records(per_group=2), tmp_path, seed=1,
                                     allocation={"Canada": 2, "Ireland": 2, "Scotland": 2})
    assert len(kept) == 6
    assert all(k["text"].strip() for k in kept)                 # empty sentence left out
    assert all(k["y"].dtype == np.float32 and k["y"].size >= 16000 for k in kept)  # 0.4 s decoy left out
    assert {k["accent_group"] for k in kept} == {"Canada", "Ireland", "Scotland"}


def test_kws_shortfall_is_a_clear_error(paper_ws, monkeypatch, tmp_path):
    with pytest.raises(paper.CorpusError, match=r"keyword .yes.: 11 speakers in the test list, 12 needed"):
        paper.build_item_banks(paper_ws, seed=0, cv_dataset=fake_cv_records(), n_per_keyword=12,
                               overwrite=True, n_librispeech=2, cv_allocation={"Canada": 1})


def test_missing_corpus_says_run_stage_1(tmp_path):
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(paper.CorpusError, match="run stage 1"):
        paper.build_item_banks(ws, cv_dataset=[])
    with pytest.raises(paper.CorpusError, match="run stage 1"):
        paper.battery_specs(ws)


# ------------------------------------------------------------------------------------------------
# stage 3
# ------------------------------------------------------------------------------------------------
def test_battery_specs_table_1(paper_ws):
    specs = paper.battery_specs(paper_ws)
    assert len(specs) == 20 and len({s["bg_id"] for s in specs}) == 20
    by = {s["bg_id"]: s for s in specs}
    assert sum(s["source_package"] == "ESC-50" for s in specs) == 12
    assert sum(s["source_package"] == "MS-SNSD" for s in specs) == 5
    assert {s["category"] for s in specs} == {"stationary", "transient", "music", "speech-like"}
    for s in specs:
        assert set(s) >= {"bg_id", "category", "description", "sources", "combine", "source_package",
                          "licence", "attribution", "synthetic"}
        assert s["combine"] == "concat" and s["synthetic"] is False
        assert all(Path(p).is_file() for p in s["sources"])
    assert Path(by["esc50_rain"]["sources"][0]).name == "1-100010-A-10.wav"      # fold 1, take A
    assert Path(by["mssnsd_cafeteria"]["sources"][0]).name == "CafeTeria_1.wav"
    assert Path(by["mssnsd_air_conditioner"]["sources"][0]).parent.name == "noise_train"
    assert by["musan_hubbub"]["sources"][0].endswith("speech/librivox/speech-librivox-0001.wav")
    assert by["noisex_babble"]["sources"][0].endswith("noisex92/babble.wav")


def test_battery_curation_with_the_demo_code(paper_ws):
    backgrounds = pytest.importorskip("aiplib.backgrounds")
    df = backgrounds.curate_battery(paper_ws, paper.battery_specs(paper_ws), duration_s=2.0)
    assert len(df) == 20 and set(df.bg_id) == {b[0] for b in paper.BATTERY}
    for p in df.path:
        info = sf.info(str(paper_ws.path(p)))
        assert (info.samplerate, info.channels, info.frames) == (16000, 1, 32000)
    assert (paper_ws.descriptors / "battery.csv").is_file()
