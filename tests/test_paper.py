"""aiplib.sources.corpora.paper: stage 1–3 of the ``paper`` profile on fake corpora served on 127.0.0.1.

The fake archives (tests/fake_corpora.py) have each corpus's real folder layout and metadata files;
the Common Voice path uses a fake record stream, never the hub.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fake_corpora import (
    ESC_TARGETS,
    LS_SPEAKERS,
    build_archives,
    closed_port_url,
    fake_cv_records,
    fake_registry,
    serve_corpora,
)

from aiplib.core import DEFAULT_SEED, errors
from aiplib.core.workspace import workspace
from aiplib.sources import download as dl
from aiplib.sources.corpora import common_voice, paper, speech_commands
from aiplib.sources.download import CorpusError, RemoteFile

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
    with pytest.raises(errors.DownloadError) as exc:
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
    with pytest.raises(errors.DownloadError) as exc:
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
    with pytest.raises(errors.ChecksumError, match=r"test-clean\.tar\.gz.*MD5"):
        paper.download_all(ws, corpora=["librispeech"], base_urls=server.url, registry=bad, progress=False)
    assert not (ws.root / "speech_asr/librispeech/LibriSpeech/test-clean").exists()


def test_unsafe_corpus_archive_is_refused(tmp_path, archives, registry):
    from fake_corpora import FakeServer, make_targz

    evil = make_targz({"musan/README": b"x", "../../escaped.txt": b"owned"})
    reg = dict(registry)
    reg["musan"] = dataclasses.replace(reg["musan"], files=(RemoteFile("musan.tar.gz"),))
    ws = workspace("paper", data_root=tmp_path / "data")
    with FakeServer({"/musan/musan.tar.gz": evil}) as srv:
        with pytest.raises(errors.UnsafeArchiveError, match=r"\.\./\.\./escaped\.txt"):
            paper.download_all(ws, corpora=["musan"], base_urls=srv.url, registry=reg, progress=False)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (ws.root / "backgrounds/musan/musan").exists()


def test_disk_space_shortage_is_reported_in_gb(tmp_path, server, registry, monkeypatch):
    monkeypatch.setattr(dl, "_free_bytes", lambda p: 10_000)
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(errors.InsufficientDiskSpaceError, match=r"musan\.tar\.gz.*needs \d+\.\d\d GB"):
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


# stage 2 (the authors' rules, scripts/02_build_banks.py)
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def banks(paper_ws):
    return paper.build_item_banks(paper_ws, cv_dataset=fake_cv_records())


def _authors_librispeech_ids(root: Path, n: int) -> list:
    """An independent re-statement of the authors' rule: sorted transcripts, Random(42).shuffle."""
    import random

    ids = []
    for part in ("test-clean", "test-other"):
        for tf in sorted((root / "LibriSpeech" / part).rglob("*.trans.txt")):
            for line in tf.read_text().splitlines():
                utt = line.strip().split(" ", 1)[0]
                if (tf.parent / f"{utt}.flac").exists():
                    ids.append(utt)
    random.Random(42).shuffle(ids)
    return ids[:n]


def _authors_kws_ids(root: Path, n: int) -> list:
    import random

    rng, items = random.Random(42), []
    for kw in speech_commands.KEYWORDS:
        files = sorted((root / kw).glob("*.wav"))
        rng.shuffle(files)
        items += [f"kws_{kw}_{w.stem}" for w in files[:n // 10 + 2]]
    for kw in ("_background_noise_", "silence"):
        files = sorted((root / kw).glob("*.wav")) if (root / kw).exists() else []
        rng.shuffle(files)
        items += [f"kws_nt_{kw}_{w.stem}" for w in files[:n // 4]]
    for kw in speech_commands.KEYWORDS[:4]:
        items += [f"probe_{kw}_{w.stem}" for w in sorted((root / kw).glob("*.wav"))[-3:]]
    rng.shuffle(items)
    return items[:n]


def test_item_banks_follow_the_authors_rules(paper_ws, banks):
    asr, kws = banks["asr"], banks["kws"]
    assert len(asr) == 180 and asr.item_id.is_unique and len(kws) == 120 and kws.item_id.is_unique
    ls = asr[asr.source.str.startswith("LibriSpeech")]
    ls_root = paper_ws.root / "speech_asr/librispeech"
    assert list(ls.item_id) == _authors_librispeech_ids(ls_root, 100)
    assert list(kws.item_id) == _authors_kws_ids(paper_ws.root / "kws/speech_commands/speech_commands_v0.02", 120)
    # gender from SPEAKERS.TXT (fake: sorted speaker ids alternate F, M); the authors' accent label
    spk = sorted({s for v in LS_SPEAKERS.values() for s, _ in v}, key=int)
    want = {s: ("female", "male")[i % 2] for i, s in enumerate(spk)}
    assert all(r.gender == want[r.item_id.split("-")[0]] for r in ls.itertuples())
    assert set(ls.accent) == {"american_english"} and ls.accent_group.isna().all()
    # Common Voice: the first 80 records with accent and gender, ids cv_<client[:8]>_<k>
    recs = [r for r in fake_cv_records() if r["accent"] not in ("", "unknown")
            and r["gender"] not in ("", "Unknown")][:80]
    cv = asr[asr.source.str.startswith("Common Voice")]
    assert list(cv.item_id) == [f"cv_{r['client_id'][:8]}_{k}" for k, r in enumerate(recs)]
    assert list(cv.text) == [r["sentence"] for r in recs] and list(cv.gender) == [r["gender"] for r in recs]
    assert list(cv.accent) == [r["accent"] for r in recs]
    groups = cv.accent_group.dropna()
    assert groups.nunique() == 11 and set(groups) == set(common_voice.CV_ACCENT_GROUPS.values())
    assert cv[cv.accent == "United States English,England English"].accent_group.isna().all()
    # KWS: targets, non-targets from _background_noise_, probes with is_target false
    assert set(kws[kws.is_target].label) <= set(speech_commands.KEYWORDS)
    probes = kws[kws.item_id.str.startswith("probe_")]
    assert (~probes.is_target).all() and list(probes.probe_id) == list(probes.item_id)
    assert kws[kws.probe_id.isna()].is_target.sum() == (kws.label != "_background_noise_").sum() - len(probes)
    # every record says which rule picked it
    assert all("authors' scripts/02_build_banks.py" in r for r in list(asr.selection_rule) + list(kws.selection_rule))
    for fam in ("asr", "kws"):
        rows = [json.loads(x) for x in (paper_ws.itembanks / f"{fam}.jsonl").read_text().splitlines()]
        extra = {"text", "gender", "accent"} if fam == "asr" else {"label", "is_target", "probe_id"}
        assert all(set(r) == ARCH_FIELDS | extra | {"selection_rule"} for r in rows)
        for r in rows[:3] + rows[-3:]:
            info = sf.info(str(paper_ws.path(r["path"])))
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "FLOAT")
            assert r["path"] == f"itembanks/audio/{fam}/{r['item_id']}.wav"
            assert paper_ws.path(r["source_file"]).is_file()
    # the Common Voice originals are saved as the authors did: <id>.wav, native rate, 16-bit PCM
    saved = sorted((paper_ws.root / "speech_asr/common_voice").iterdir())
    assert [p.stem for p in saved] == sorted(cv.item_id)
    assert {(sf.info(str(p)).samplerate, sf.info(str(p)).subtype) for p in saved} == {(48000, "PCM_16")}


@pytest.mark.slow
def test_item_banks_are_reused_and_reproducible(paper_ws, banks):
    again = paper.build_item_banks(paper_ws, cv_dataset=[])  # read back, not rebuilt
    assert list(again["asr"].item_id) == list(banks["asr"].item_id)
    same = paper.build_item_banks(paper_ws, seed=8, cv_dataset=fake_cv_records(), overwrite=True)
    assert list(same["asr"].item_id) == list(banks["asr"].item_id)   # the authors' seed, whatever `seed` is
    assert list(same["kws"].item_id) == list(banks["kws"].item_id)


def test_common_voice_shortfall_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match=r"ended after 10 clip\(s\) with accent and gender labels, 80 needed"):
        common_voice.select_common_voice(fake_cv_records(10), tmp_path / "cv")
    assert not (tmp_path / "cv").exists()  # nothing saved when the selection cannot be made


def test_accent_groups_come_from_the_data_file(tmp_path):
    groups = common_voice.read_accent_groups()
    assert groups == common_voice.CV_ACCENT_GROUPS and len(groups) == 11 and len(set(groups.values())) == 11
    assert common_voice.ACCENT_GROUPS_FILE.name == "cv_accent_groups.csv"
    assert common_voice.accent_group("India and South Asia (India, Pakistan, Sri Lanka)") == "India & S. Asia"
    assert common_voice.accent_group(" West Indies and Bermuda (Bahamas, Bermuda, Jamaica, Trinidad) ") == "West Indies & Bermuda"
    assert common_voice.accent_group("Filipino") is None and common_voice.accent_group(None) is None
    assert common_voice.accent_group("United States English,England English") is None
    custom = tmp_path / "g.csv"
    custom.write_text("cv_accent,accent_group\nFilipino,Philippines\n")
    assert common_voice.accent_group("Filipino", common_voice.read_accent_groups(custom)) == "Philippines"
    custom.write_text("cv_accent,accent_group\nFilipino,A\nFilipino,B\n")
    with pytest.raises(CorpusError, match="listed twice"):
        common_voice.read_accent_groups(custom)


def _fake_datasets(version: str, calls: list, records: list):
    import types

    mod = types.ModuleType("datasets")
    mod.__version__ = version

    class Stream(list):
        def cast_column(self, column, feature):
            calls.append(("cast_column", column, feature))
            return self

    def load_dataset(path, name=None, **kw):
        calls.append(("load_dataset", path, name, kw))
        return Stream(records)

    mod.load_dataset = load_dataset
    mod.Audio = lambda decode=True: ("Audio", decode)
    return mod


def test_common_voice_step_with_a_fake_script_dataset(tmp_path, monkeypatch):
    """datasets 3.x: the script data set is streamed as the authors did (validation, trust_remote_code)."""
    import sys

    calls = []
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets("3.5.1", calls, fake_cv_records(6)))
    ds = common_voice.load_common_voice()
    assert calls[0] == ("load_dataset", "fsicoli/common_voice_17_0", "en",
                        {"split": "validation", "streaming": True, "trust_remote_code": True})
    assert calls[1] == ("cast_column", "audio", ("Audio", False))
    kept = common_voice.select_common_voice(ds, tmp_path, n=5)
    assert [k["item_id"][-2:] for k in kept] == ["_0", "_1", "_2", "_3", "_4"]
    assert all(k["y"].dtype == np.float32 and abs(k["y"].size / 16000 - sf.info(str(k["source_file"])).duration) < 1e-3
               for k in kept)


@pytest.mark.parametrize("version", ["4.0.0", "4.1.1"])
def test_common_voice_step_refuses_datasets_4_clearly(version, monkeypatch):
    import sys

    from aiplib.core.errors import MissingPackageError

    calls = []
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(version, calls, []))
    with pytest.raises(MissingPackageError) as ei:
        common_voice.load_common_voice()
    msg = str(ei.value)
    assert "loading-script" in msg and f"datasets {version}" in msg and "pip install 'datasets>=3.5,<4'" in msg
    assert calls == []  # never reached the hub


def test_common_voice_step_without_datasets(monkeypatch):
    import sys

    from aiplib.core.errors import MissingPackageError

    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(MissingPackageError, match=r"datasets>=3\.5,<4"):
        common_voice.load_common_voice()


def test_kws_shortfall_is_a_clear_error(paper_ws):
    with pytest.raises(CorpusError, match=r"Speech Commands: 133 candidate clips, 200 needed"):
        paper.build_item_banks(paper_ws, cv_dataset=fake_cv_records(), n_kws=200, overwrite=True)


def test_missing_corpus_says_run_stage_1(tmp_path):
    ws = workspace("paper", data_root=tmp_path)
    with pytest.raises(CorpusError, match="run stage 1"):
        paper.build_item_banks(ws, cv_dataset=[])
    with pytest.raises(CorpusError, match="run stage 1"):
        paper.battery_specs(ws)


# ------------------------------------------------------------------------------------------------
# stage 3
# ------------------------------------------------------------------------------------------------
AUTHORS_BG_IDS = ["esc_rain", "esc_seawave", "esc_engine", "esc_vacuum", "esc_footsteps", "esc_fire",
                  "esc_helicopter", "esc_clock", "esc_keyboard", "esc_dog", "esc_rooster", "esc_wind",
                  "snsd_cafeteria", "snsd_restaurant", "snsd_square", "snsd_airport", "noisex_babble",
                  "musan_music", "musan_hubbub", "snsd_airconditioner"]
"""``BATTERY_SPEC`` ids of the authors' scripts/03_curate_battery.py, in their order."""


def check_table_1(specs):
    assert [s["bg_id"] for s in specs] == AUTHORS_BG_IDS
    by = {s["bg_id"]: s for s in specs}
    assert sum(s["source_package"] == "ESC-50" for s in specs) == 12
    assert sum(s["source_package"] == "MS-SNSD" for s in specs) == 5
    # the two files where the authors' spec differs from the first file of the class
    assert by["musan_music"]["sources"][0].endswith("musan/music/fma/music-fma-0062.wav")
    assert Path(by["snsd_airport"]["sources"][0]).name == "AirportAnnouncements_7.wav"
    assert Path(by["esc_rain"]["sources"][0]).name == "1-100010-A-10.wav"      # fold 1, take A, class 10
    assert Path(by["esc_dog"]["sources"][0]).name == "1-100000-A-0.wav"
    assert Path(by["snsd_cafeteria"]["sources"][0]).name == "CafeTeria_1.wav"
    assert Path(by["snsd_airconditioner"]["sources"][0]).parent.name == "noise_train"
    assert by["musan_hubbub"]["sources"][0].endswith("speech/librivox/speech-librivox-0001.wav")
    assert by["noisex_babble"]["sources"][0].endswith("noisex92/babble.wav")
    assert by["musan_music"]["authors_category"] == "speech_like" and by["esc_wind"]["authors_category"] == "non_speech"


def test_battery_specs_table_1(paper_ws):
    specs = paper.battery_specs(paper_ws)
    check_table_1(specs)
    for s in specs:
        assert set(s) >= {"bg_id", "category", "description", "sources", "combine", "source_package",
                          "licence", "attribution", "synthetic"}
        assert s["combine"] == "concat" and s["synthetic"] is False
        assert all(Path(p).is_file() for p in s["sources"])


def test_battery_curation_with_the_demo_code(paper_ws):
    backgrounds = pytest.importorskip("aiplib.battery.backgrounds")
    df = backgrounds.curate_battery(paper_ws, paper.battery_specs(paper_ws), duration_s=2.0)
    assert len(df) == 20 and set(df.bg_id) == set(AUTHORS_BG_IDS)
    for p in df.path:
        info = sf.info(str(paper_ws.path(p)))
        assert (info.samplerate, info.channels, info.frames, info.subtype) == (16000, 1, 32000, "PCM_16")
    assert (paper_ws.descriptors / "battery.csv").is_file()


# ------------------------------------------------------------------------------------------------
# dry run: stages 1–5 of PROFILE=paper on the loopback mirror (the notebooks' calls, in order)
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_paper_profile_dry_run_stages_1_to_5(tmp_path, server, registry, monkeypatch):
    """``make 01 02 03 04 05 PROFILE=paper MIRROR=<loopback>`` as function calls: the same
    ``aiplib.sources.pipeline`` / stage functions notebooks 01–05 call, with their parameters (smoke sizes:
    the authors' 5 items per bank), on fake corpora with the real file names."""
    from aiplib.battery.backgrounds import curate_battery
    from aiplib.battery.descriptors import descriptor_table
    from aiplib.sources import pipeline
    from aiplib.stimuli.manifests import build_manifests

    monkeypatch.setenv("AIP_MIRROR", server.url)          # what `make … MIRROR=` exports
    ws = workspace("paper", data_root=tmp_path)
    # 01: downloads from the mirror (the fake registry carries the fake files' digests)
    done = pipeline.gather_raw(ws, registry=registry, progress=False)
    assert set(done) == set(paper.CORPORA)
    urls = [e["url"] for e in json.loads((ws.root / "checks/download_progress.json").read_text())["files"].values()]
    assert len(urls) == 7 and all(u.startswith(server.url + "/") for u in urls)
    # 02: the authors' rules at their smoke size
    sizes = pipeline.stage_sizes("paper", smoke=True)
    assert sizes == {"n_librispeech": 5, "n_common_voice": 5, "n_kws": 5}
    banks = pipeline.build_item_banks(ws, seed=DEFAULT_SEED, cv_dataset=fake_cv_records(), **sizes)
    asr, kws = banks["asr"], banks["kws"]
    assert list(asr.item_id[:5]) == _authors_librispeech_ids(ws.root / "speech_asr/librispeech", 5)
    assert list(kws.item_id) == _authors_kws_ids(ws.root / "kws/speech_commands/speech_commands_v0.02", 5)
    assert len(asr) == 10 and asr.item_id.str.startswith("cv_").sum() == 5
    # 03: Table 1 with the authors' ids and the two corrected files
    specs = pipeline.battery_specs(ws)
    check_table_1(specs)
    battery = curate_battery(ws, specs, duration_s=3.0)
    assert list(battery.bg_id) == AUTHORS_BG_IDS
    # 04: descriptors of the 20 backgrounds
    table = descriptor_table(ws, progress=False)
    assert len(table) == 20 and set(table.index if table.index.name == "bg_id" else table.bg_id) == set(
        AUTHORS_BG_IDS)
    # 05: manifests, 61 rows per item (clean + 20 backgrounds × 3 SNRs); the KWS injection probes
    # stay in the bank, flagged, and get no rows and no seed (the authors' build_manifests)
    raw_kws = [json.loads(x) for x in (ws.itembanks / "kws.jsonl").read_text().splitlines()]
    probe_ids = [r["item_id"] for r in raw_kws if r.get("probe_id")]
    assert probe_ids and all(p.startswith("probe_") for p in probe_ids)
    manifests = build_manifests(ws, snrs=[10, 5, 0])
    for fam, bank in (("asr", asr), ("kws", kws)):
        m = manifests[fam]
        fg = [i for i in bank.item_id if i not in set(probe_ids)]
        assert len(m) == 61 * (len(bank) - (len(probe_ids) if fam == "kws" else 0)) == 61 * len(fg)
        assert m.groupby("speech_id").size().to_dict() == {i: 61 for i in fg}
        assert not set(m.speech_id) & set(probe_ids)
        # an independent count of the seeds: 61 per kept item, in bank order, from 0 / 10000
        want = {}
        for k, item in enumerate(fg):
            want[f"{item}_clean"] = (0 if fam == "asr" else 10000) + 61 * k
        got = m.set_index("id")["seed"]
        assert {i: int(got[i]) for i in want} == want
        # the authors' schema: their columns first, in their order, then ours
        theirs = ["id", "speech_id", "background_id", "snr_db", "condition", "seed", "speech_path", "bg_path"]
        theirs += ["accent", "gender", "transcript"] if fam == "asr" else ["keyword", "is_target"]
        assert list(m.columns[:len(theirs)]) == theirs
        assert list(m.seed) == list(range(0 if fam == "asr" else 10000, (0 if fam == "asr" else 10000) + len(m)))
        first = fg[0]
        rows = m[m.speech_id == first]
        assert rows.id.iloc[0] == f"{first}_clean" and rows.snr_db.iloc[0] == 99
        assert rows.condition.iloc[0] == "clean" and (rows.condition.iloc[1:] == "noisy").all()
        assert list(rows.id.iloc[1:4]) == [f"{first}_{AUTHORS_BG_IDS[0]}_snr{n}" for n in (10, 5, 0)]
        assert set(rows.background_id.iloc[1:]) == set(AUTHORS_BG_IDS)


# ------------------------------------------------------------------------------------------------
# the corpus modules' prepare_<corpus> readers (lhotse's recipe layout) on the downloaded fakes
# ------------------------------------------------------------------------------------------------
def test_prepare_readers_of_each_corpus(paper_ws):
    from aiplib.sources.corpora import esc50, ms_snsd, musan

    esc = esc50.prepare_esc50(paper.corpus_dir(paper_ws, "esc50"))
    assert len(esc) == 28 and set(esc.target) == set(ESC_TARGETS.values())
    rain = esc[(esc.target == 10) & (esc.fold == 1) & (esc["take"] == "A")]
    assert list(rain.filename) == ["1-100010-A-10.wav"] and Path(rain.path.iloc[0]).is_file()
    snsd = ms_snsd.prepare_ms_snsd(paper.corpus_dir(paper_ws, "ms_snsd"))
    assert (snsd.split == "noise_train").sum() == 9 and (snsd.split == "noise_test").sum() == 2
    caf = snsd[snsd.noise_type == "CafeTeria"]
    assert list(zip(caf.split, caf["index"])) == [("noise_train", 1), ("noise_train", 2)]
    mus = musan.prepare_musan(paper.corpus_dir(paper_ws, "musan"))
    assert mus.groupby("subset").size().to_dict() == {"music": 3, "noise": 1, "speech": 2}
    assert "music-fma-0062" in set(mus.rec_id)
    sc_dir = paper.corpus_dir(paper_ws, "speech_commands")
    sizes = {s: len(speech_commands.prepare_speech_commands(sc_dir, split=s))
             for s in ("test", "validation", "train", None)}
    assert sizes == {"test": 10 * 11 + 15, "validation": 10 + 15, "train": 0, None: 150}
    test = speech_commands.prepare_speech_commands(sc_dir)
    assert test.is_target.sum() == 110 and set(test[test.is_target].label) == set(speech_commands.KEYWORDS)
