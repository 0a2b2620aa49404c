# %% [markdown]
# # 2 · Item banks
#
# **Reads** `raw/`. **Writes** `itembanks/asr.jsonl` (utterances with reference transcripts and accent
# groups) and `itembanks/kws.jsonl` (keyword clips: `label`, `is_target`), each item's audio as a
# 16 kHz mono WAV under `itembanks/audio/`, and the source, licence and attribution of every item.
# In `demo`, the accent groups are **synthetic voices** (espeak-ng and flite) standing in for accents;
# the real speech is one Asterisk speaker.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
seed: int = 20240917  # item selection seed
overwrite: bool = False  # rebuild existing item banks

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib import pipeline

sizes = pipeline.stage_sizes(profile, smoke)
banks = pipeline.build_item_banks(ws, seed=seed, overwrite=overwrite, **sizes)
{family: len(df) for family, df in banks.items()}

# %%
banks["asr"].groupby("accent_group").agg(items=("item_id", "size"), mean_s=("duration_s", "mean"))
