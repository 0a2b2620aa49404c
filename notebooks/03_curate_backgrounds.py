# %% [markdown]
# # 3 · The background battery
#
# **Reads** the profile's background sources. **Writes** `bg/<bg_id>.wav` (mono 16 kHz, looped or cut
# to 30 s, loudness-normalised to −23 LUFS (the authors’ value) with pyloudnorm, ITU-R BS.1770) and
# `descriptors/battery.csv` (category, source, licence, attribution, source duration, gain, LUFS).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
duration_s: float = 30.0  # length of every curated background, s
target_lufs: float = -23.0  # loudness of every background, LUFS
seed: int = 20240917  # seeds the synthetic controls
overwrite: bool = False

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib import pipeline
from aiplib.backgrounds import curate_battery

specs = pipeline.battery_specs(ws)
battery = curate_battery(ws, specs, duration_s=duration_s, target_lufs=target_lufs, seed=seed,
                         overwrite=overwrite)
battery[["bg_id", "category", "source_package", "licence", "source_duration_s", "lufs_after"]]

# %%
battery.groupby("category").size()
