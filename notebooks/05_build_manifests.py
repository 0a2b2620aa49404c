# %% [markdown]
# # 5 · Stimulus manifests
#
# **What the authors did.** Each item is presented clean and mixed with each of the 20 backgrounds at
# 10, 5 and 0 dB SNR: 61 stimuli per item. The mixture is made on the fly by `mixing/mix.py`
# (IvLabs/AIP-Speech) from a manifest row: a background segment at a seeded offset, scaled to the
# target SNR against the speech power, added, and the sum scaled down if it would clip. Ids are
# `<item>_clean` / `<item>_<background>_snr<N>`; seeds count rows from 0 (ASR) and 10000 (KWS).
# KWS injection probes (paper profile, `probe_id` set) stay in the item bank but get no rows and no
# seed, as the authors' `build_manifests` ("probes are used as backgrounds, not foreground").
# **What we do.** The authors' schema and formula bit for bit (`aiplib.stimuli.families.materialize(row)`);
# no audio is written. One column is ours: `bg_active` marks rows whose background segment is
# digital silence (the stimulus is then effectively clean); stage 9 counts them and repeats the
# analysis without them. The manifests are rebuilt on every run (a fraction of a second) and a file
# is rewritten only when its bytes change; stage 7 keys each row on what the model heard, so it
# re-runs exactly the stimuli whose rows changed.
#
# **Condition families** (`suite`). `background` is the battery above. `competing_speech`
# mixes each item with other talkers (one language, or a cocktail of three) at -10 to +10 dB;
# `channel` passes the clean speech through a telephone band, codecs, packet loss, clipping, low
# level, rooms, echo or a cut. Each family has its own manifests, `manifests/<family>/<asr|kws>.csv`,
# with the clean rows of its items (same ids) so the drops pair within the family; a channel
# condition the local ffmpeg cannot encode is not replaced: it is listed in
# `manifests/channel/skipped.csv` with the reason.
#
# **Reads** the item banks and the battery (and the distractor table for `competing_speech`).
# **Writes** `manifests/asr.csv` and `manifests/kws.csv` (and the family manifests of the suite).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
snrs: list[int] = [10, 5, 0]  # SNRs in dB (integers)
overwrite: bool = False
seed_offset: int = 0  # added to the first seed of each family (ASR 0, KWS 10000 as the authors); 0 reproduces theirs
suite: str = "background"  # condition families: background | competing_speech | channel | comma list | all

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.stimuli.family_manifests import family_manifest_summary
from aiplib.stimuli.family_manifests import build_family_manifests

by_family = build_family_manifests(ws, suite, seed_offset=seed_offset, snrs=snrs, overwrite=overwrite)
manifests = {family: df for (cf, family), df in by_family.items() if cf == "background"}

# %% [markdown]
# Stimuli per family: rows, stimuli per item (61 for 20 backgrounds × 3 SNRs + clean) and rows
# whose background segment is silent (`bg_active` false).

# %%
import pandas as pd

pd.DataFrame({family: {"rows": len(df), "per item": sorted(df.groupby("speech_id").size().unique().tolist()),
                       "silent background rows": int((df["bg_active"] == False).sum())}  # noqa: E712
              for family, df in manifests.items()}).T

# %% [markdown]
# An excerpt of the ASR manifest in the authors' columns: the clean row and the first mixtures of
# the first item (background file, offset, SNR, seed).

# %%
manifests["asr"].head(6) if "asr" in manifests else print("no background ASR manifest: the suite does not hold background")

# %% [markdown]
# The condition families of this suite: manifests, rows, items, conditions, and the conditions
# skipped here with their reason.

# %%
family_manifest_summary(ws, by_family)

# %% [markdown]
# ## The rule on one row
# A mixture's id is `<item>_<background>_snr<N>` and its seed is its row number in the manifest counted
# from the family's first seed (ASR 0, KWS 10000, plus `seed_offset`), as the authors' `build_manifests`.
# Here the first mixture of the second item, its id and seed rebuilt from its columns and its row number.

# %%
import numpy as np
from aiplib.stimuli.manifests import SEED_START

if "asr" in manifests:
    man = manifests["asr"]
    item = man["speech_id"].unique()[min(1, man["speech_id"].nunique() - 1)]
    row_no = int(np.flatnonzero((man["speech_id"] == item).to_numpy() & (man["condition"] == "noisy").to_numpy())[0])
    row = man.iloc[row_no]
    rule = {"id": f"{row['speech_id']}_{row['background_id']}_snr{int(row['snr_db'])}",
            "seed": SEED_START["asr"] + seed_offset + row_no}
    display(pd.DataFrame({"manifest": [row["id"], int(row["seed"])], "rule": [rule["id"], rule["seed"]],
                          "agree": [row["id"] == rule["id"], int(row["seed"]) == rule["seed"]]},
                         index=["id", "seed"]).rename_axis(f"row {row_no}"))  # the Checks below assert it

# %% [markdown]
# ## Checks
# Every foreground item (injection probes aside) has 1 + n_backgrounds × n_SNRs rows (61 for the
# 20 backgrounds at 10, 5 and 0 dB: its clean row and one per background and SNR), and the seeds
# count the rows in order from the family's first seed (0 for ASR, 10000 for KWS, plus
# `seed_offset`); the first mixture's background offset follows from its seed
# (`aiplib.stimuli.mixing.bg_offset`). A broken rule stops the run here, naming the manifest and the row.

# %%
import numpy as np
import soundfile as sf
from aiplib.io.formats import read_battery_csv, read_item_bank
from aiplib.stimuli.manifests import SEED_START, foreground_items
from aiplib.stimuli.mixing import bg_offset

if not manifests:
    print("no check here: the suite does not hold background (its family manifests have their own rules)")
n_backgrounds = len(read_battery_csv(ws.battery_csv)) if manifests else 0
per_item = 1 + n_backgrounds * len(snrs)
for family, df in manifests.items():
    items, n_probes = foreground_items(read_item_bank(ws, family))
    counts = df.groupby("speech_id", sort=False).size()
    wrong = counts[counts != per_item]
    assert wrong.empty, (f"manifests/{family}.csv: item {wrong.index[0]!r} has {wrong.iloc[0]} rows; the rule is "
                         f"1 + {n_backgrounds} backgrounds × {len(snrs)} SNRs = {per_item} ({len(wrong)} items break it)")
    missing = sorted(set(items["item_id"].astype(str)) - set(counts.index.astype(str)))
    assert not missing, f"manifests/{family}.csv: {len(missing)} items of the item bank have no rows, first {missing[0]!r}"
    assert len(df) == len(items) * per_item, f"manifests/{family}.csv: {len(df)} rows, not {len(items)} items × {per_item}"
    start = SEED_START[family] + seed_offset
    off_rule = df["seed"].to_numpy() != np.arange(start, start + len(df))
    assert not off_rule.any(), (f"manifests/{family}.csv row {off_rule.argmax()} ({df['id'].iloc[off_rule.argmax()]}): "
                                f"seed {df['seed'].iloc[off_rule.argmax()]}, the row counter from {start} gives "
                                f"{start + off_rule.argmax()}")
    row = df[df["condition"] == "noisy"].iloc[0]
    offset = bg_offset(int(row["seed"]), sf.info(str(ws.path(row["bg_path"]))).frames, int(row["n_samples"]))
    assert offset == row["bg_offset"], f"manifests/{family}.csv {row['id']}: bg_offset {row['bg_offset']}, seed {row['seed']} gives {offset}"
    print(f"{family}: {len(items)} items × {per_item} rows = {len(df)} ({n_probes} probes without rows); seeds "
          f"{start}…{start + len(df) - 1} in row order; {row['id']}: seed {row['seed']} → offset {offset} samples")
