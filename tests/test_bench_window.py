"""benchmarks/bench_window.py: the slice it decodes and the validity table, on made-up responses."""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_window as bw  # noqa: E402


def _manifest(family, n_items=12, bgs=("a", "b", "c", "d"), snrs=(10, 5, 0)):
    rows = []
    for i in range(n_items):
        item = f"{family}{i:02d}"
        extra = ({"transcript": "one two three four"} if family == "asr"
                 else {"keyword": "yes", "is_target": True})
        rows.append({"id": f"{item}_clean", "speech_id": item, "background_id": "clean", "snr_db": 99,
                     "condition": "clean", **extra})
        rows += [{"id": f"{item}_{b}_{s}", "speech_id": item, "background_id": b, "snr_db": s,
                  "condition": "noisy", **extra} for b in bgs for s in snrs]
    return pd.DataFrame(rows)


def test_slice_has_every_clean_item_and_per_cell_items_per_cell():
    m = _manifest("asr")
    s = bw.select_slice(m, 2, seed=0)
    assert (s["condition"] == "clean").sum() == 12
    noisy = s[s["condition"] != "clean"]
    assert len(noisy) == 4 * 3 * 2 and noisy.groupby(["background_id", "snr_db"]).size().eq(2).all()
    assert noisy["speech_id"].nunique() == 12  # 24 draws dealt over 12 items: each twice
    assert s.equals(bw.select_slice(m, 2, seed=0)) and not s.equals(bw.select_slice(m, 2, seed=1))


def _responses(rows, bad_bg_words, clean_hyp="one two three four"):
    out = []
    for r in rows.itertuples():
        if r.condition == "clean":
            out.append(clean_hyp)
        else:  # the ranking of the backgrounds: d worst, a best
            out.append(" ".join(["one", "two", "three", "four"][: 4 - bad_bg_words[r.background_id]]))
    return out


def test_validity_table_and_verdict():
    asr_rows = bw.select_slice(_manifest("asr"), 3, 0)
    kws_rows = bw.select_slice(_manifest("kws"), 1, 0)
    kws_resp = ["yes"] * len(kws_rows)
    bad = {"a": 0, "b": 1, "c": 2, "d": 3}
    asr = {w: bw.asr_scores(asr_rows, _responses(asr_rows, bad)) for w in bw.WINDOWS}
    kws = {w: bw.kws_scores(kws_rows, kws_resp) for w in bw.WINDOWS}
    res = bw.compare(asr, kws, n_resamples=500, seed=0)
    assert res["wer"]["fast"]["clean"] == 0.0 and res["kws_acc"]["window"]["clean"] == 100.0
    d = res["clean_delta"]["capped_wer_pp"]
    assert (d["estimate"], d["lo"], d["hi"], d["n_items"], d["n_resamples"]) == (0.0, 0.0, 0.0, 12, 500)
    # backgrounds a..d delete 0..3 of 4 words: ΔWER 0 / 25 / 50 / 75 pp, same ranking for both windows
    assert res["delta_by_background"]["window"] == {"a": 0.0, "b": 25.0, "c": 50.0, "d": 75.0}
    assert res["rank_agreement"]["rho"] == 1.0 and res["verdict"]["window_passes"]
    # a window that loses a word on every clean item: the interval excludes 0, the default stays
    asr["window"] = bw.asr_scores(asr_rows, _responses(asr_rows, bad, clean_hyp="one two three"))
    res = bw.compare(asr, kws, n_resamples=500, seed=0)
    assert res["clean_delta"]["capped_wer_pp"]["estimate"] == 25.0
    assert not res["verdict"]["window_passes"] and "excludes 0" in res["verdict"]["why_not"][0]
    assert np.isclose(res["wer"]["window"]["clean"], 25.0)
