import json

import numpy as np

from aiplib import checks
from aiplib.manifests import build_manifests


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

    monkeypatch.setattr("aiplib.models.load_model", lambda model: Fake())
    df = checks.wer_constancy(tiny_ws, n_items=2, seed=0)
    assert len(df) == 6
    assert sorted(df.loc[df.item_id == "a00", "wer"].tolist()) == [0.0, 0.0, 0.0]
    assert df.loc[df.item_id == "a01", "wer"].tolist() == [0.5, 0.5, 0.5]
