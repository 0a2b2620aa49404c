"""Condition families (issue 14): the suite, the workspace views, the family manifests, their
materialisation, their resume keys, and a stage-7 smoke of each family with a fake recogniser."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_tiny_workspace

import aiplib.inference.models
from aiplib.core import stamps
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import CONDITION_FAMILIES, parse_suite
from aiplib.core.workspace import workspace
from aiplib.inference import keys
from aiplib.inference.models import Recogniser, get_entry
from aiplib.inference.runner import run_inference, run_suite
from aiplib.io.audio import SR, write_wav
from aiplib.io.formats import read_inference_jsonl, read_manifest
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.sources.distractors import prepare_distractors
from aiplib.stimuli.channel import CHANNEL_CONDITIONS, describe
from aiplib.stimuli.families import materialize, mix_components
from aiplib.stimuli.family_manifests import (
    build_family_manifest,
    family_manifest_columns,
    skipped_csv,
)
from aiplib.stimuli.manifests import build_manifests, manifest_columns

CHEAP_CHANNEL = ["telephone", "packet_loss_10pct", "clip_+20db", "cut_tail_300ms"]
"""Channel conditions of the stage-7 smoke (no room: pyroomacoustics costs ~30 s the first time)."""


def add_distractors(ws, *, langs=("fr", "it", "ru", "es")) -> pd.DataFrame:
    """A distractor table of four fake languages, three utterances each (1.0–1.8 s, speech-like)."""
    rows = []
    for li, lang in enumerate(langs):
        for k in range(3):
            t = np.arange(int(SR * (1.0 + 0.4 * k))) / SR
            y = 0.2 * np.sin(2 * np.pi * (320 + 70 * li + 20 * k) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
            p = write_wav(ws.root / "dis" / lang / f"u{k}.wav", y.astype(np.float32))
            rows.append(dict(distractor_id=f"{lang}-u{k}", language=lang, voice=f"{lang}_voice", sex="female",
                             same_voice_as_target=lang == "es", key=f"u{k}", path=str(p), text=f"{lang}word{k} mot",
                             text_norm=f"{lang}word{k} mot", n_words=2, duration_s=len(t) / SR, source="test",
                             licence="CC0", attribution="test"))
    table = pd.DataFrame(rows, columns=al.DISTRACTOR_COLUMNS)
    ws.distractors_csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(ws.distractors_csv, index=False)
    return table


@pytest.fixture
def fam_ws(tmp_path):
    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=2, n_bg=2)
    add_distractors(ws)
    build_manifests(ws, snrs=[10, 0])
    return ws


class DigestRecogniser(Recogniser):
    """Answers each stimulus with a digest of its samples (so a row belongs to one stimulus)."""

    def __init__(self, entry):
        self.name, self.entry, self.batch_size = entry.id, entry, 8

    def info(self):
        return {"path": "fake", "window": None, "weights_path": "none"}

    def generate(self, audios, prompts):
        import hashlib

        return ["w" + hashlib.sha256(np.asarray(a, np.float32).tobytes()).hexdigest()[:10] for a in audios]

    def close(self):
        pass


@pytest.fixture
def fake_model(monkeypatch):
    monkeypatch.setattr(aiplib.inference.models, "load_model",
                        lambda entry, **_: DigestRecogniser(get_entry(entry) if isinstance(entry, str) else entry))


def parts_snr_db(c) -> float:
    s, b = c["speech"].astype(np.float64), c["background"].astype(np.float64)
    return 10 * math.log10(np.sum(s * s) / np.sum(b * b))


# ------------------------------------------------------------------------------ names and views
def test_parse_suite_names_order_and_errors():
    assert parse_suite("background") == ("background",)
    assert parse_suite(" channel, background ") == ("background", "channel")
    assert parse_suite("all") == tuple(CONDITION_FAMILIES) == ("background", "competing_speech", "channel")
    assert parse_suite("") == parse_suite(None) == ("background",)
    with pytest.raises(AiplibParameterError, match="unknown condition family 'chanel'.*background, competing_speech, channel"):
        parse_suite("background,chanel")
    with pytest.raises(AiplibParameterError, match="unknown condition family 'bogus'"):
        parse_suite("all,bogus")  # "all" does not hide a misspelt name


def test_family_view_moves_manifests_inference_checks_and_scores_only(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    ch = ws.with_family("channel")
    assert ws.condition_family == "background" and ws.with_family("background") == ws
    assert ws.manifest_csv("asr") == ws.root / "manifests" / "asr.csv"           # today's paths
    assert ws.inference_jsonl("m", "asr") == ws.root / "inference" / "m" / "asr.jsonl"
    assert ws.scores_dir == ws.root / "results" / "scores"
    assert ch.manifest_csv("asr") == ws.root / "manifests" / "channel" / "asr.csv"
    assert ch.inference_jsonl("m", "kws") == ws.root / "inference" / "channel" / "m" / "kws.jsonl"
    assert ch.run_log("m") == ws.root / "inference" / "channel" / "m" / "run_log.jsonl"
    assert ch.mix_diagnostics_csv == ws.root / "checks" / "channel" / "mix_diagnostics.csv"
    assert ch.scores_csv("asr") == ws.root / "results" / "scores" / "channel" / "asr.csv"
    for shared in ("raw", "itembanks", "bg", "descriptors", "battery_csv", "tables_dir", "figures_dir",
                   "distractors_csv"):
        assert getattr(ch, shared) == getattr(ws, shared), shared
    assert ch.path("itembanks/audio/a.wav") == ws.root / "itembanks" / "audio" / "a.wav"
    with pytest.raises(AiplibParameterError, match="unknown condition family"):
        ws.with_family("reverb")


def test_distractor_parameters_come_in_pairs_and_competing_needs_the_table(tmp_path):
    ws = make_tiny_workspace(tmp_path, n_asr=1, n_kws=1, n_bg=1)
    with pytest.raises(AiplibParameterError, match="both distractors_dir and distractor_texts"):
        prepare_distractors(ws, distractors_dir=str(tmp_path))
    assert prepare_distractors(workspace("custom", data_root=tmp_path)) is None  # custom without a folder
    with pytest.raises(AiplibParameterError, match="distractors_dir and distractor_texts") as err:
        build_family_manifest(ws, "competing_speech", "asr")
    assert "\n" not in str(err.value) and "raw/distractors/distractors.csv" in str(err.value)


# ------------------------------------------------------------------------------ competing speech
def test_competing_manifest_rows_ids_seeds_columns_and_clean_rows(fam_ws):
    df = build_family_manifest(fam_ws, "competing_speech", "asr")
    bg = read_manifest(fam_ws, "asr")
    assert list(df.columns) == family_manifest_columns("competing_speech", "asr") == (
        manifest_columns("asr") + list(CONDITION_FAMILIES["competing_speech"].columns))
    assert manifest_columns("asr")[-1] == "condition_family" and set(bg["condition_family"]) == {"background"}
    assert len(df) == 2 * (1 + 5 * 5) == 52                      # 4 single + 1 cocktail, 5 SNRs
    assert df["seed"].tolist() == list(range(20000, 20052))
    assert set(df["condition_family"]) == {"competing_speech"}
    first = df[df["speech_id"] == "a00"]
    assert first["id"].tolist()[:3] == ["a00_clean", "a00_talker_fr_snr-10", "a00_talker_fr_snr-5"]
    assert first["id"].iloc[-1] == "a00_cocktail_fr_it_ru_snr10"
    assert sorted(df["snr_db"].unique()) == [-10, -5, 0, 5, 10, 99]
    # the clean rows are the background manifest's (id, audio, reference) so ΔWER pairs in the family
    keep = ["id", "speech_id", "background_id", "snr_db", "condition", "speech_path", "bg_path", "transcript",
            "n_samples"]
    assert df[df["condition"] == "clean"][keep].reset_index(drop=True).equals(
        bg[bg["condition"] == "clean"][keep].reset_index(drop=True))
    noisy = df[df["condition"] == "noisy"].set_index("id")
    assert (noisy["bg_path"] == "").all()
    assert noisy.loc["a00_talker_es_snr0", "same_voice_as_target"] == "True"   # es: the target's voice
    assert noisy.loc["a00_talker_fr_snr0", "same_voice_as_target"] == "False"
    ck = noisy.loc["a01_cocktail_fr_it_ru_snr-5"]
    assert ck["setting"] == "cocktail" and ck["distractor_languages"] == "fr+it+ru"
    ids = ck["distractor_ids"].split("|")
    assert [i.split("-")[0] for i in ids][:1] == ["fr"] and {i[:2] for i in ids} == {"fr", "it", "ru"}
    assert ck["distractor_text"].split()[:2] == [f"{ids[0].replace('-u', 'word')}", "mot"]
    params = json.loads(ck["condition_params"])
    assert ck["condition_params"] == json.dumps(params, sort_keys=True, separators=(",", ":"))
    assert params["languages"] == ["fr", "it", "ru"] and params["seed"] == ck["seed"] and params["gap_s"] == 0.2


def test_competing_rows_materialise_bit_for_bit_at_the_requested_snr(fam_ws):
    df = build_family_manifest(fam_ws, "competing_speech", "asr").set_index("id", drop=False)
    for rid in ("a00_talker_fr_snr-10", "a01_talker_ru_snr10", "a01_cocktail_fr_it_ru_snr0"):
        row = df.loc[rid].to_dict()
        y1, info = materialize(row, fam_ws)
        y2, _ = materialize(dict(row), fam_ws)
        assert y1.dtype == np.float32 and y1.tobytes() == y2.tobytes()
        c = mix_components(row, fam_ws)
        assert abs(parts_snr_db(c) - row["snr_db"]) < 0.1 and abs(info.achieved_snr_db - row["snr_db"]) < 0.1
        assert np.max(np.abs(c["speech"].astype(np.float64) + c["background"] - y1)) < 1e-6
        assert c["detail"]["languages"] == json.loads(row["condition_params"])["languages"]
    # a family's clean row gives the background clean row's samples
    bg = read_manifest(fam_ws, "asr").set_index("id", drop=False)
    assert materialize(df.loc["a00_clean"].to_dict(), fam_ws)[0].tobytes() == \
        materialize(bg.loc["a00_clean"].to_dict(), fam_ws)[0].tobytes()


def test_changed_distractor_table_is_refused_naming_the_row(fam_ws):
    df = build_family_manifest(fam_ws, "competing_speech", "asr").set_index("id", drop=False)
    row = df.loc["a00_talker_it_snr0"].to_dict()
    table = pd.read_csv(fam_ws.distractors_csv)
    table[table["distractor_id"] != row["distractor_ids"].split("|")[0]].to_csv(fam_ws.distractors_csv, index=False)
    with pytest.raises(AiplibParameterError, match="a00_talker_it_snr0.*distractor table changed"):
        materialize(row, fam_ws)


# ------------------------------------------------------------------------------ channel
def test_channel_manifest_rows_and_skipped_conditions(fam_ws):
    df = build_family_manifest(fam_ws, "channel", "kws")
    avail = list(describe().query("available")["condition"])
    assert list(df.columns) == family_manifest_columns("channel", "kws")
    assert len(df) == 2 * (1 + len(avail)) and df["seed"].iloc[0] == 50000
    rows = df[df["speech_id"] == "k00"]
    assert rows["id"].tolist() == ["k00_clean"] + [f"k00_ch_{n}" for n in avail]
    ch = df[df["condition"] != "clean"]
    assert (ch["snr_db"] == 99).all() and (ch["applied_to"] == "speech").all() and (ch["bg_path"] == "").all()
    assert (ch["condition"] == "channel_" + ch["channel_condition"]).all()
    assert (ch["background_id"] == ch["channel_condition"]).all()
    tel = json.loads(ch.loc[ch["channel_condition"] == "telephone", "condition_params"].iloc[0])
    assert tel == {"high_hz": 3400.0, "low_hz": 300.0, "transform": "telephone"}
    skipped = pd.read_csv(skipped_csv(fam_ws, "channel"), keep_default_na=False)
    assert sorted(skipped["condition"]) == sorted(set(CHANNEL_CONDITIONS) - set(avail))
    assert (skipped["reason"].str.len() > 20).all() and not set(skipped["condition"]) & set(ch["channel_condition"])


def test_condition_family_manifests_leave_the_kws_probes_out_without_a_seed(tmp_path):
    def family_rows(root, probe: str):
        ws = make_tiny_workspace(root, n_asr=1, n_kws=3, n_bg=1)
        bank = ws.itembanks / "kws.jsonl"
        rows = [json.loads(line) for line in bank.read_text().splitlines()]
        if probe == "flagged":
            rows[1]["probe_id"] = "probe_k01"  # the middle item is an injection probe
        elif probe == "absent":
            del rows[1]
        bank.write_text("".join(json.dumps(r) + "\n" for r in rows))
        add_distractors(ws)
        build_manifests(ws, snrs=[10, 0])
        meta = lambda: json.loads((ws.root / "manifests" / "channel" / "kws.json").read_text())  # noqa: E731
        return build_family_manifest(ws, "channel", "kws"), meta()

    df, meta = family_rows(tmp_path / "flagged", "flagged")
    alone, _ = family_rows(tmp_path / "absent", "absent")
    kept, _ = family_rows(tmp_path / "kept", "none")
    n_cond = 1 + int(describe()["available"].sum())
    assert set(df["speech_id"]) == {"k00", "k02"} and len(df) == 2 * n_cond
    assert (meta["n_probes_skipped"], meta["n_items"]) == (1, 2)
    # the seeds as if the probe were not in the bank; with it scored, k02's seeds would move
    assert df[["id", "seed"]].equals(alone[["id", "seed"]])
    k02 = kept[kept["speech_id"] == "k02"]["seed"].to_numpy()
    assert (k02 > df[df["speech_id"] == "k02"]["seed"].to_numpy()).all()


def _band_energy(y, lo, hi):
    """(energy inside [lo, hi] Hz, energy outside it) of a Welch spectrum (as tests/test_channel.py)."""
    from scipy import signal

    f, p = signal.welch(y.astype(np.float64), fs=SR, nperseg=4096)
    inside = (f >= lo) & (f <= hi)
    return p[inside].sum(), p[~inside].sum()


def test_channel_rows_materialise_bit_for_bit_with_their_defining_property(fam_ws):
    df = build_family_manifest(fam_ws, "channel", "kws", conditions=CHEAP_CHANNEL).set_index("id", drop=False)
    tel = df.loc["k00_ch_telephone"].to_dict()
    y1, info = materialize(tel, fam_ws)
    assert y1.tobytes() == materialize(dict(tel), fam_ws)[0].tobytes()
    assert info.target_snr_db == math.inf and info.achieved_snr_db == math.inf
    clean = materialize(df.loc["k00_clean"].to_dict(), fam_ws)[0]            # white-noise item
    in_t, out_t = _band_energy(y1, 300, 3400)
    assert 10 * math.log10(out_t / in_t) <= -40                              # outside 300–3400 Hz: ≥ 40 dB down
    in_c, _ = _band_energy(clean, 400, 3300)
    assert abs(10 * math.log10(_band_energy(y1, 400, 3300)[0] / in_c)) < 1.0  # the passband passes
    c = mix_components(tel, fam_ws)
    assert np.max(np.abs(c["speech"].astype(np.float64) + c["background"] - y1)) < 1e-6  # parts add up
    lost = mix_components(df.loc["k01_ch_packet_loss_10pct"].to_dict(), fam_ws)
    frames = lost["detail"]["lost_frames"]
    assert len(frames) == 5 and all(not lost["mixture"][f * 320:(f + 1) * 320].any() for f in frames)
    cut = materialize(df.loc["k00_ch_cut_tail_300ms"].to_dict(), fam_ws)[0]
    assert cut.size == clean.size - 4800 and cut.tobytes() == clean[:-4800].tobytes()


# ------------------------------------------------------------------------------ resume keys
def _todays_base(row, ws) -> str:
    """The resume base as it was before the condition families (keys.stimulus_base, 2026-11)."""
    rec = {k: keys._val(row.get(k)) for k in keys.STIM_KEY_FIELDS}
    if not rec.get("bg_path"):
        rec["seed"] = rec["bg_offset"] = None
    for k, col in (("speech_sha256", "speech_path"), ("bg_sha256", "bg_path")):
        rec[k] = stamps.file_sha256(ws.path(rec[col])) if rec.get(col) else ""
    return stamps.json_sha256(rec)


def test_resume_keys_background_unchanged_family_rows_keyed_on_seed_and_table(fam_ws):
    bg = read_manifest(fam_ws, "asr")
    for row in bg.to_dict("records"):
        assert keys.stimulus_base(row, fam_ws) == _todays_base(row, fam_ws), row["id"]
    comp = build_family_manifest(fam_ws, "competing_speech", "asr").set_index("id", drop=False)
    row = comp.loc["a00_talker_fr_snr0"].to_dict()
    base = keys.stimulus_base(row, fam_ws)
    assert keys.stimulus_base(dict(row, seed=row["seed"] + 1), fam_ws) != base
    assert keys.stimulus_base(dict(row, condition_params=row["condition_params"].replace("0.2", "0.3")), fam_ws) != base
    assert keys.stimulus_base(comp.loc["a00_clean"].to_dict(), fam_ws) == \
        keys.stimulus_base(bg.set_index("id", drop=False).loc["a00_clean"].to_dict(), fam_ws)
    pd.read_csv(fam_ws.distractors_csv).iloc[::-1].to_csv(fam_ws.distractors_csv, index=False)
    assert keys.stimulus_base(row, fam_ws) != base                              # the table's SHA-256
    ch = build_family_manifest(fam_ws, "channel", "asr", conditions=CHEAP_CHANNEL).set_index("id", drop=False)
    r = ch.loc["a01_ch_packet_loss_10pct"].to_dict()
    assert keys.stimulus_base(dict(r, seed=r["seed"] + 1), fam_ws) != keys.stimulus_base(r, fam_ws)


def test_unknown_condition_family_is_refused(fam_ws):
    row = read_manifest(fam_ws, "asr").iloc[1].to_dict()
    with pytest.raises(AiplibParameterError, match="unknown condition family 'echoes'"):
        mix_components(dict(row, condition_family="echoes"), fam_ws)


# ------------------------------------------------------------------------------ stage 7 smoke
@pytest.mark.slow
def test_stage7_runs_each_family_in_its_own_folder_and_leaves_background_alone(fam_ws, fake_model):
    s = run_inference(fam_ws, tasks="asr,kws", progress=False)
    assert s["n_run"].tolist() == [2 * (1 + 2 * 2)] * 2
    bg_files = {p: p.read_bytes() for p in (fam_ws.inference / "whisper_tiny_en").glob("*.jsonl")}
    bg_manifests = {p: p.read_bytes() for p in fam_ws.manifests.glob("*.csv")}
    for task in ("asr", "kws"):
        build_family_manifest(fam_ws, "competing_speech", task)
        build_family_manifest(fam_ws, "channel", task, conditions=CHEAP_CHANNEL)
    summary, times = run_suite(fam_ws, "competing_speech,channel", tasks="asr,kws", progress=False)
    assert times["condition_family"].tolist() == ["competing_speech", "channel"] and (times["seconds"] > 0).all()
    assert summary.groupby("condition_family")["n_run"].sum().to_dict() == {
        "competing_speech": 2 * 26 * 2, "channel": 2 * 5 * 2}
    assert set(summary["n_errors"]) == {0}
    for cf in ("competing_speech", "channel"):
        fws = fam_ws.with_family(cf)
        for task in ("asr", "kws"):
            path = fam_ws.root / "inference" / cf / "whisper_tiny_en" / f"{task}.jsonl"
            rows = read_inference_jsonl(path)[0]
            assert [r["id"] for r in rows] == read_manifest(fws, task)["id"].tolist()
            assert {r["condition_family"] for r in rows} == {cf}
        assert (fam_ws.root / "checks" / cf / "mix_diagnostics.csv").is_file()
    # the background results and manifests did not move, and a run of every family redoes nothing
    assert {p: p.read_bytes() for p in (fam_ws.inference / "whisper_tiny_en").glob("*.jsonl")} == bg_files
    assert {p: p.read_bytes() for p in fam_ws.manifests.glob("*.csv")} == bg_manifests
    again, _ = run_suite(fam_ws, "all", tasks="asr,kws", progress=False)
    assert again["n_run"].sum() == 0 and list(again["condition_family"].unique()) == list(CONDITION_FAMILIES)
    log = pd.read_csv(fam_ws.checks / "stage7_families.csv")
    assert log["condition_family"].tolist() == ["competing_speech", "channel", *CONDITION_FAMILIES]
    assert (fam_ws.checks / "stage7_families.csv").read_text().count("run_start") == 1  # appended under one header


def test_channel_row_errors_name_the_row_and_file(fam_ws):
    """A transform that cannot apply (here: a cut longer than the utterance) names the row and its file."""
    import json

    from aiplib.stimuli.channel import row_components

    build_family_manifest(fam_ws, "channel", "asr", conditions=CHEAP_CHANNEL)
    m = read_manifest(fam_ws.with_family("channel"), "asr")
    row = m[m["channel_condition"] == "cut_tail_300ms"].iloc[0].to_dict()
    row["condition_params"] = json.dumps({**json.loads(row["condition_params"]), "ms": 60000.0})
    with pytest.raises(AiplibParameterError, match=rf"channel row '{row['id']}' \({row['speech_path']}\): cut tail"):
        row_components(row, fam_ws)
    del row["speech_path"]
    with pytest.raises(AiplibParameterError, match=rf"channel row '{row['id']}': bad .*speech_path"):
        row_components(row, fam_ws)


def test_demo_prompts_decoded_once_to_flac_hold_the_same_samples(tmp_path):
    """Stage 1 (demo) stores the Asterisk G.722 prompts as 16-bit FLAC: the samples load_audio gives
    for the G.722 file, bit for bit, and a table whose paths are relative to the workspace root."""
    from aiplib.io.audio import load_audio
    from aiplib.sources.distractors import _decoded

    try:
        table = al.asterisk_distractors(("fr",)).head(3)
    except aiplib.core.errors.MissingPackageError:
        pytest.skip("asterisk-core-sounds-fr(-g722) not installed")
    ws = workspace("demo", data_root=tmp_path)
    dec = _decoded(ws, table)
    assert dec["path"].str.startswith("raw/distractors/audio/fr/").all()
    for rel, src in zip(dec["path"], dec["source_path"]):
        assert np.array_equal(load_audio(ws.path(rel)), load_audio(src))
    dec.to_csv(ws.distractors_csv, index=False)
    back = al.read_distractor_table(ws.distractors_csv, root=ws.root)
    assert back["path"].tolist() == [str(ws.path(r)) for r in dec["path"]]


def test_a_changed_prompt_file_is_decoded_again(tmp_path):
    """The FLAC cache is keyed on the SHA-256 of the package's file: a replaced prompt (a newer
    Debian package) is decoded again; an unchanged one is not touched."""
    import shutil

    from aiplib.io.audio import load_audio
    from aiplib.sources.distractors import _decoded

    try:
        table = al.asterisk_distractors(("fr",)).head(3).reset_index(drop=True)
    except aiplib.core.errors.MissingPackageError:
        pytest.skip("asterisk-core-sounds-fr(-g722) not installed")
    src = tmp_path / "pkg"
    src.mkdir()
    copies = [shutil.copy(p, src / f"{i}{Path(p).suffix}") for i, p in enumerate(table["path"])]
    table = table.assign(path=[str(c) for c in copies])
    ws = workspace("demo", data_root=tmp_path / "ws")
    first = _decoded(ws, table)
    flacs = [ws.path(r) for r in first["path"]]
    mtimes = [f.stat().st_mtime_ns for f in flacs]
    shutil.copy(copies[2], copies[0])  # the "new package" ships other audio under the same name
    second = _decoded(ws, table)
    assert second["path"].tolist() == first["path"].tolist()
    assert np.array_equal(load_audio(flacs[0]), load_audio(copies[2]))
    assert [f.stat().st_mtime_ns for f in flacs[1:]] == mtimes[1:]
    assert flacs[0].stat().st_mtime_ns != mtimes[0]


def test_same_voice_holds_for_the_asterisk_voice_s_own_items_only(fam_ws):
    """The Asterisk table flags es as the voice of the demo's real ASR items (speaker
    asterisk_allison); a synthetic target hearing es is not a same-voice condition."""
    table = pd.read_csv(fam_ws.distractors_csv)
    table.assign(source="asterisk-core-sounds-" + table["language"] + "-g722").to_csv(fam_ws.distractors_csv, index=False)
    bank = pd.read_json(fam_ws.item_bank("asr"), lines=True, dtype={"item_id": str})
    bank.loc[bank["item_id"] == "a00", "speaker"] = "asterisk_allison"
    bank.to_json(fam_ws.item_bank("asr"), orient="records", lines=True)
    df = build_family_manifest(fam_ws, "competing_speech", "asr").set_index("id")
    assert df.loc["a00_talker_es_snr0", "same_voice_as_target"] == "True"
    assert df.loc["a01_talker_es_snr0", "same_voice_as_target"] == "False"
    assert df.loc["a00_talker_fr_snr0", "same_voice_as_target"] == "False"


def test_same_language_distractor_never_plays_the_target_prompt(fam_ws):
    """talker_en: the target's own Asterisk prompt (same voice folder and file name as its
    source_file) is excluded; the other prompts of that voice are heard; the rows come after the
    other languages and before the cocktail."""
    import json

    item = json.loads(fam_ws.item_bank("asr").read_text().splitlines()[0])
    table = pd.read_csv(fam_ws.distractors_csv, dtype=str, keep_default_na=False)
    en = table[table["language"] == "fr"].assign(language="en", voice="en_US_f_Allison",
                                                 distractor_id=lambda t: "en-" + t["key"])
    # the first English prompt is the target's own recording, as the package holds it
    en["source_path"] = [f"/usr/share/asterisk/sounds/en_US_f_Allison/{k}.g722" for k in en["key"]]
    item_source = f"raw/asterisk-core-sounds-en-g722/asterisk/sounds/en_US_f_Allison/{en['key'].iloc[0]}.g722"
    bank = [json.loads(x) for x in fam_ws.item_bank("asr").read_text().splitlines()]
    bank[0]["source_file"] = item_source
    fam_ws.item_bank("asr").write_text("".join(json.dumps(r) + "\n" for r in bank))
    pd.concat([table.assign(source_path=table["path"]), en], ignore_index=True).to_csv(fam_ws.distractors_csv, index=False)
    m = build_family_manifest(fam_ws, "competing_speech", "asr")
    conds = list(dict.fromkeys(m.loc[m["background_id"] != "clean", "background_id"]))
    assert conds == ["talker_fr", "talker_it", "talker_ru", "talker_es", "talker_en", "cocktail_fr_it_ru"]
    rows = m[(m["speech_id"] == item["item_id"]) & (m["background_id"] == "talker_en")]
    assert len(rows) == 5
    own = en["distractor_id"].iloc[0]
    for r in rows.itertuples():
        assert own in json.loads(r.condition_params)["exclude_ids"]
        assert own not in r.distractor_ids.split("|") and set(r.distractor_ids.split("|")) <= set(en["distractor_id"])
    other = m[(m["speech_id"] != item["item_id"]) & (m["background_id"] == "talker_en")]
    assert not any(own in json.loads(p)["exclude_ids"] for p in other["condition_params"])
