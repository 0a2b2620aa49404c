import json

import numpy as np
import pandas as pd
import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.io.audio import write_wav
from aiplib.io.formats import read_manifest
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import AUTHOR_COLUMNS, build_manifests, manifest_columns, stimulus_id


def test_authors_schema_ids_seeds_and_order(tiny_ws):
    out = build_manifests(tiny_ws)
    for fam, df in out.items():
        assert list(df.columns) == manifest_columns(fam)
        assert list(df.columns[: len(AUTHOR_COLUMNS[fam])]) == AUTHOR_COLUMNS[fam]
        counts = df.groupby("speech_id").size()
        assert (counts == 61).all(), counts
        assert df["id"].is_unique
        start = {"asr": 0, "kws": 10000}[fam]
        assert df["seed"].tolist() == list(range(start, start + len(df)))
        clean = df[df["condition"] == "clean"]
        assert (clean["background_id"] == "clean").all() and (clean["snr_db"] == 99).all()
        assert (clean["bg_path"] == "").all() and clean["bg_active"].isna().all()
        assert sorted(df.loc[df["condition"] == "noisy", "snr_db"].unique().tolist()) == [0, 5, 10]
    asr = out["asr"]
    # per item: clean, then each background in battery order at 10, 5, 0 dB
    assert asr["id"].head(5).tolist() == ["a00_clean", "a00_bg00_snr10", "a00_bg00_snr5", "a00_bg00_snr0",
                                          "a00_bg01_snr10"]
    assert asr.loc[61, "id"] == "a01_clean" and asr.loc[61, "seed"] == 61
    assert out["kws"].loc[0, "seed"] == 10000 and out["kws"].loc[0, "keyword"] == "yes"
    assert asr.loc[1, "transcript"] == "word 0" and asr.loc[1, "accent"] == "g2"
    assert stimulus_id("a01", "bg03", 5) == "a01_bg03_snr5"
    assert stimulus_id("a01", "bg03", 10.0) == "a01_bg03_snr10"
    assert stimulus_id("a01", "clean") == "a01_clean"
    with pytest.raises(AiplibParameterError, match="integer"):
        stimulus_id("a01", "bg03", 2.5)


def test_ids_named_NA_stay_strings(tiny_ws):
    # an item and a background called "NA" (from NA.wav) must not become NaN
    p = tiny_ws.itembanks / "asr.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    rows[0]["item_id"], rows[0]["text"], rows[0]["accent_group"] = "NA", "null", "NA"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bat = pd.read_csv(tiny_ws.descriptors / "battery.csv")
    write_wav(tiny_ws.bg / "NA.wav", np.full(16000 * 3, 0.01, dtype=np.float32))
    bat.loc[0, "bg_id"], bat.loc[0, "path"] = "NA", "bg/NA.wav"
    bat.to_csv(tiny_ws.descriptors / "battery.csv", index=False)
    build_manifests(tiny_ws, families=("asr",))
    df = read_manifest(tiny_ws, "asr")
    assert df.loc[0, "id"] == "NA_clean" and df.loc[0, "speech_id"] == "NA"
    assert df.loc[1, "id"] == "NA_NA_snr10" and df.loc[1, "background_id"] == "NA"
    assert df.loc[0, "transcript"] == "null" and df.loc[0, "accent_group"] == "NA"
    assert not df[["id", "speech_id", "background_id", "transcript"]].isna().any().any()
    y, _ = materialize(df.loc[1].to_dict(), tiny_ws)
    assert y.shape == (16000,)


def test_rebuilt_manifest_is_byte_identical(tiny_ws):
    """Stage 5 is rebuilt on every run; the same inputs give the same bytes (so the stage-7 keys,
    which hash the rows' content, keep every inference row: tests/test_stamps.py)."""
    build_manifests(tiny_ws)
    p = tiny_ws.manifests / "asr.csv"
    before = p.read_bytes()
    build_manifests(tiny_ws)
    assert p.read_bytes() == before


def test_materialize_twice_gives_identical_bytes(tiny_ws, tmp_path):
    build_manifests(tiny_ws)
    df = read_manifest(tiny_ws, "asr")
    rows = df.sample(10, random_state=0).to_dict("records")
    for r in rows:
        a, ia = materialize(r, tiny_ws)
        b, ib = materialize(r, tiny_ws, write=tmp_path / "x.wav")
        assert a.tobytes() == b.tobytes()
        assert a.dtype == np.float32 and a.shape[0] == r["n_samples"]
        if r["condition"] == "noisy" and ia.clip_scale == 1.0:
            assert abs(ia.achieved_snr_db - r["snr_db"]) < 0.01


def test_same_row_same_samples_in_a_rebuilt_manifest(tiny_ws):
    build_manifests(tiny_ws)
    df1 = read_manifest(tiny_ws, "kws")
    build_manifests(tiny_ws, overwrite=True)
    df2 = read_manifest(tiny_ws, "kws")
    pd.testing.assert_frame_equal(df1, df2)
