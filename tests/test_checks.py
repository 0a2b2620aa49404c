import json

import numpy as np

from aiplib.scoring import wer_check
from aiplib.stimuli import checks
from aiplib.stimuli.manifests import build_manifests


def test_active_fraction_known_values():
    y = np.zeros(16000)
    assert checks.active_fraction(y) == 0.0
    y[:8000] = 0.1  # first half loud, second half silent
    assert abs(checks.active_fraction(y, frame=500) - 0.5) < 1e-9


def test_background_presence_measures_target_snr(tiny_ws):
    build_manifests(tiny_ws)
    df = checks.background_presence(tiny_ws, max_items=1)
    assert len(df) == 2 * 20 * 3  # two families × 20 backgrounds × 3 SNRs
    assert df["max_abs_error_db"].max() < 0.01
    assert df["present"].all()
    assert (tiny_ws.checks / "bg_presence.csv").is_file()


def test_determinism_and_inspection(tiny_ws):
    build_manifests(tiny_ws)
    res = checks.determinism(tiny_ws, n_rows=5, seed=1)
    assert res["identical_bytes"] and res["seeds_match"] and res["offsets_match"]
    assert res["n_rows"] == 10
    saved = json.loads((tiny_ws.checks / "determinism.json").read_text())
    assert len(saved["stimuli"]) == 10
    written = checks.write_inspection_clips(tiny_ws, n=7, seed=0)
    assert len(written) == 7 and all(p.is_file() for p in written)


def test_wer_constancy_with_a_fake_recogniser(tiny_ws, monkeypatch):
    build_manifests(tiny_ws)

    class Fake:
        def generate(self, audios, prompts):
            return ["word 0" for _ in audios]

        def close(self):
            pass

    monkeypatch.setattr("aiplib.inference.models.load_model", lambda model, **opts: Fake())
    df = wer_check.wer_constancy(tiny_ws, n_items=2, seed=0)
    assert len(df) == 6
    assert sorted(df.loc[df.item_id == "a00", "wer"].tolist()) == [0.0, 0.0, 0.0]
    assert df.loc[df.item_id == "a01", "wer"].tolist() == [0.5, 0.5, 0.5]


def test_inactive_share_per_background(tiny_ws):
    from aiplib.io.audio import write_wav

    # bg01: a 3 s clip whose last 2.5 s are zero padding (as ESC-50 clips are)
    y = np.zeros(48000, dtype=np.float32)
    y[:8000] = 0.1 * np.random.default_rng(0).standard_normal(8000).astype(np.float32)
    write_wav(tiny_ws.bg / "bg01.wav", y)
    man = build_manifests(tiny_ws)
    df = checks.inactive_backgrounds(tiny_ws)
    assert len(df) == 2 * 20 and (df["n_rows"] == df["family"].map({"asr": 6, "kws": 6})).all()
    got = df.set_index(["family", "bg_id"])
    asr = man["asr"]
    sub = asr[asr["background_id"] == "bg01"]
    expected = float((~sub["bg_active"].astype(bool)).mean())
    # by hand: a segment is silent when it starts at or after sample 8000 (offsets are < 48000 − n)
    by_hand = float(((sub["bg_offset"] >= 8000)).mean())
    assert got.loc[("asr", "bg01"), "inactive_share"] == expected == by_hand
    assert got.loc[("asr", "bg00"), "inactive_share"] == 0.0
    assert (tiny_ws.checks / "bg_inactive.csv").is_file()
    # a silent segment is not an error: presence reports an infinite achieved SNR, not a failure
    pres = checks.background_presence(tiny_ws, max_items=2)
    assert len(pres) == 2 * 20 * 3


def test_inspection_clips_are_the_current_stimuli(tiny_ws):
    """A clip of the same id is mixed again (its audio may have changed), and a clip of an
    earlier run that is not picked now is removed: the folder holds exactly index.csv's clips."""
    import pandas as pd
    import soundfile as sf

    from aiplib.io.audio import write_wav
    from aiplib.io.formats import read_manifest
    from aiplib.stimuli.families import materialize

    build_manifests(tiny_ws)
    first = checks.write_inspection_clips(tiny_ws, n=7, seed=0)
    write_wav(first[0], np.zeros(1600, dtype=np.float32), subtype="PCM_16")  # "an old run's audio"
    stale = first[0].parent / "asr_not_in_this_run.wav"
    write_wav(stale, np.zeros(1600, dtype=np.float32), subtype="PCM_16")
    again = checks.write_inspection_clips(tiny_ws, n=7, seed=0)
    assert again == first and not stale.exists()
    assert sorted(p.name for p in first[0].parent.glob("*.wav")) == sorted(p.name for p in again)
    idx = pd.read_csv(first[0].parent / "index.csv", dtype=str)
    fam, sid = idx.iloc[0]["family"], idx.iloc[0]["id"]
    assert first[0].name == f"{fam}_{sid}.wav"
    row = read_manifest(tiny_ws, fam).set_index("id").loc[sid].to_dict() | {"id": sid}
    y, _ = materialize(row, tiny_ws)
    clip, _ = sf.read(str(first[0]), dtype="float32")
    assert clip.shape == y.shape and np.max(np.abs(clip - y)) <= 1 / 32768 + 1e-7


def test_wer_constancy_compares_paired_items_when_an_endpoint_fails_some_requests(tmp_path, monkeypatch):
    """Issue 37: an OpenAI-compatible endpoint (a real HTTP server) refuses every 4th request. Each
    item's WER is the same at the three levels ("word 1" against "word 0"/"word 1"/"word 2": 0.5,
    0, 0.5), so the spread over the items decoded at every level is 0; the failed decodes are
    counted and named, and their items left out at every level."""
    import threading
    from http.server import ThreadingHTTPServer

    import tiny_models as tm
    from conftest import make_tiny_workspace
    from test_command_openai import KEY, _api_entry, _FlakyFake

    ws = make_tiny_workspace(tmp_path / "data", n_asr=3, n_kws=1, n_bg=1)
    build_manifests(ws)
    _FlakyFake.count = [0]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyFake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIP_TEST_API_KEY", KEY)
    entry = _api_entry(f"http://127.0.0.1:{srv.server_address[1]}/v1", "initial_prompt",
                       engine_args={"backoff_s": 0.01, "max_retries": 0})
    tm.use_registry(monkeypatch, tm.registry_yaml(tmp_path / "r.yaml", {"api_asr": entry}))
    try:
        df = wer_check.wer_constancy(ws, model="api_asr", n_items=3, seed=0)
    finally:
        srv.shutdown()
        srv.server_close()
    item_wer = {"a00": 0.5, "a01": 0.0, "a02": 0.5}
    ok = df[df["error"].isna()]
    assert len(df) == 9 and 1 <= len(ok) < 9
    assert (ok["wer"] == ok["item_id"].map(item_wer)).all()  # the same WER at every level
    res = wer_check.paired_spread(df)
    failed = df[df["error"].notna()]
    assert res["n_failed"] == len(failed) and res["failed"] == [
        f"{i}@{lv:g} LUFS" for i, lv in zip(failed["item_id"], failed["level_lufs"])]
    assert res["left_out"] == sorted(set(failed["item_id"])) and res["n_items"] == 3
    assert res["n_paired"] == 3 - len(res["left_out"])
    if res["n_paired"]:
        paired_mean = np.mean([item_wer[i] for i in item_wer if i not in res["left_out"]])
        assert res["spread"] == 0.0 and np.allclose(res["by_level"].to_numpy(), paired_mean)
        assert list(res["by_level"].index) == [-33.0, -23.0, -13.0]
    else:
        assert np.isnan(res["spread"]) and res["by_level"].empty
