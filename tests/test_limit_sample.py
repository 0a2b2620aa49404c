"""``limit N`` as a stratified sample (issue 38, item 6): spread over items, backgrounds and SNRs,
seeded, the same on every run, each item with its clean row. Measured on a manifest of the demo's
shape (28 items x (1 clean + 20 backgrounds x 3 SNRs) = 1708 rows): the first 5 rows are 1 item and
2 backgrounds; the sample of 5 is 2 items (each with its clean row), 3 backgrounds, 3 SNRs."""
from __future__ import annotations

import pandas as pd

from aiplib.inference.plan import LIMIT_SEED, limit_note, stratified_sample


def _demo_shaped_manifest(n_items=28, n_bg=20, snrs=(10, 5, 0)) -> pd.DataFrame:
    rows = []
    for i in range(n_items):
        rows.append(dict(id=f"it{i:02d}_clean", speech_id=f"it{i:02d}", background_id="clean",
                         snr_db=99, condition="clean"))
        for b in range(n_bg):
            for s in snrs:
                rows.append(dict(id=f"it{i:02d}_bg{b:02d}_snr{s}", speech_id=f"it{i:02d}",
                                 background_id=f"bg{b:02d}", snr_db=s, condition="noisy"))
    return pd.DataFrame(rows)


def _spread(s: pd.DataFrame) -> tuple[int, int, int, int]:
    noisy = s[s["condition"] == "noisy"]
    return (s["speech_id"].nunique(), noisy["background_id"].nunique(), noisy["snr_db"].nunique(),
            int((s["condition"] == "clean").sum()))


def test_the_sample_spreads_over_items_backgrounds_and_snrs():
    m = _demo_shaped_manifest()
    assert len(m) == 1708
    assert _spread(m.head(5)) == (1, 2, 3, 1)               # what the first 5 rows cover
    assert _spread(stratified_sample(m, 5)) == (2, 3, 3, 2)
    assert _spread(stratified_sample(m, 40)) == (20, 20, 3, 20)
    assert _spread(stratified_sample(m, 200)) == (28, 20, 3, 28)
    for n in (5, 40, 200):
        s = stratified_sample(m, n)
        assert len(s) == n and s.index.is_monotonic_increasing   # manifest order
        clean_items = set(s.loc[s["condition"] == "clean", "speech_id"])
        assert set(s.loc[s["condition"] == "noisy", "speech_id"]) <= clean_items   # pairs kept


def test_the_sample_is_seeded_and_the_same_on_every_run():
    m = _demo_shaped_manifest()
    a = stratified_sample(m, 40)
    assert a.equals(stratified_sample(m.copy(), 40))
    assert not a.equals(stratified_sample(m, 40, seed=LIMIT_SEED + 1))
    assert stratified_sample(m, None) is m and stratified_sample(m, 5000) is m
    assert limit_note(40).startswith("limit 40: a stratified sample of 40 stimuli per task")
    assert f"seed {LIMIT_SEED}" in limit_note(40) and limit_note(None) == ""


def test_a_manifest_without_strata_columns_is_sampled_over_what_it_has():
    m = pd.DataFrame({"id": [f"s{i}" for i in range(10)]})
    s = stratified_sample(m, 4)
    assert len(s) == 4 and s.equals(stratified_sample(m, 4))
