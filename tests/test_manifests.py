import numpy as np
import pandas as pd

from aiplib.manifests import build_manifests, read_manifest, row_seed, stimulus_id
from aiplib.mixing import materialize


def test_61_rows_per_item_and_ids(tiny_ws):
    out = build_manifests(tiny_ws)
    for fam, df in out.items():
        counts = df.groupby("item_id").size()
        assert (counts == 61).all(), counts
        assert df["stimulus_id"].is_unique
        assert (df["bg_id"] == "clean").sum() == len(counts)
        assert sorted(df["snr_db"].dropna().unique().tolist()) == [0.0, 5.0, 10.0]
    assert stimulus_id("asr", "a01", "bg03", 5) == "asr__a01__bg03__snr+05"
    assert row_seed(1, "x") == row_seed(1, "x") != row_seed(2, "x")


def test_existing_manifest_is_kept(tiny_ws):
    build_manifests(tiny_ws)
    p = tiny_ws.manifests / "asr.csv"
    before = p.read_bytes()
    mtime = p.stat().st_mtime_ns
    build_manifests(tiny_ws)
    assert p.read_bytes() == before and p.stat().st_mtime_ns == mtime


def test_materialize_twice_gives_identical_bytes(tiny_ws, tmp_path):
    build_manifests(tiny_ws)
    df = read_manifest(tiny_ws, "asr")
    rows = df.sample(10, random_state=0).to_dict("records")
    for r in rows:
        a, ia = materialize(r, tiny_ws)
        b, ib = materialize(r, tiny_ws, write=tmp_path / "x.wav")
        assert a.tobytes() == b.tobytes()
        assert a.dtype == np.float32 and a.shape[0] == r["n_samples"]
        if r["bg_id"] != "clean":
            assert abs(ia.achieved_snr_db - r["snr_db"]) < 0.01


def test_same_row_same_samples_in_a_rebuilt_manifest(tiny_ws):
    build_manifests(tiny_ws)
    df1 = read_manifest(tiny_ws, "kws")
    build_manifests(tiny_ws, overwrite=True)
    df2 = read_manifest(tiny_ws, "kws")
    pd.testing.assert_frame_equal(df1, df2)
