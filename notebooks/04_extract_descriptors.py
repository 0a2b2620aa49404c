# %% [markdown]
# # 4 · Acoustic descriptors
#
# **Reads** `bg/*.wav` and `descriptors/battery.csv`. **Writes** `descriptors/acoustic_descriptors.csv`:
# per background the nine descriptors — zero crossing rate, spectral centroid, rolloff, bandwidth,
# flux, flatness and contrast, RMS energy variance (librosa, summarised over frames) and the Silero
# VAD speech fraction. Units and frame settings are in `aiplib.descriptors.DESCRIPTOR_INFO`.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
vad_threshold: float = 0.5  # Silero VAD speech probability threshold
overwrite: bool = False

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.descriptors import DESCRIPTOR_INFO, descriptor_table

table = descriptor_table(ws, vad_threshold=vad_threshold, overwrite=overwrite)
table.round(3)

# %%
import pandas as pd

pd.DataFrame(DESCRIPTOR_INFO, index=["unit", "meaning", "source"]).T
