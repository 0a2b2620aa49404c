# %% [markdown]
# # 4 · Acoustic descriptors
#
# **What the authors did.** For every background they computed nine descriptors with librosa at
# 16 kHz (default frames: 2048 samples, hop 512, centred) averaged over all frames — zero crossing
# rate, spectral centroid, rolloff, bandwidth, flux (mean onset strength), flatness, contrast, the
# variance of the RMS energy — and the share of frames Silero VAD calls speech
# (`vad_classify_bg.py`, IvLabs/AIP-Speech). Stage 9 rank-correlates each descriptor with the
# degradation a background causes (Table 2, Figures 2–3).
# **What we do.** The same definitions and settings (silent frames included, their share reported
# as `silent_frame_share`); units and frame settings of each descriptor are listed below
# (`aiplib.battery.descriptors.DESCRIPTOR_INFO`).
#
# **Reads** `bg/*.wav` and `descriptors/battery.csv`. **Writes** `descriptors/acoustic_descriptors.csv`.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
vad_threshold: float = 0.5  # Silero VAD speech probability threshold
overwrite: bool = False

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.battery.descriptors import DESCRIPTOR_INFO, descriptor_table

table = descriptor_table(ws, vad_threshold=vad_threshold, overwrite=overwrite)
table.round(3)

# %%
import pandas as pd

pd.DataFrame(DESCRIPTOR_INFO, index=["unit", "meaning", "source"]).T

# %% [markdown]
# ## Checks
# One row per curated background, each with the nine descriptors and every value finite.

# %%
import numpy as np
from aiplib.io.formats import read_battery_csv

bg_ids = read_battery_csv(ws.battery_csv)["bg_id"].astype(str)
assert len(DESCRIPTOR_INFO) == 9, f"{len(DESCRIPTOR_INFO)} descriptors defined, the paper has nine"
missing = [d for d in DESCRIPTOR_INFO if d not in table.columns]
assert not missing, f"acoustic_descriptors.csv lacks the descriptors {missing}"
assert sorted(table["bg_id"].astype(str)) == sorted(bg_ids), \
    (f"acoustic_descriptors.csv has {len(table)} rows for {len(bg_ids)} backgrounds; differing: "
     f"{sorted(set(bg_ids) ^ set(table['bg_id'].astype(str)))[:5]}")
values = table[list(DESCRIPTOR_INFO)].to_numpy(dtype=float)
bad = ~np.isfinite(values)
row, col = np.argwhere(bad)[0] if bad.any() else (0, 0)
assert not bad.any(), f"acoustic_descriptors.csv {table['bg_id'].iloc[row]}: {list(DESCRIPTOR_INFO)[col]} is not finite"
print(f"{len(table)} backgrounds × {len(DESCRIPTOR_INFO)} descriptors, all finite")
