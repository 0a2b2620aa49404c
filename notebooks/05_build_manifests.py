# %% [markdown]
# # 5 · Stimulus manifests
#
# **Reads** the item banks and the battery. **Writes** `manifests/asr.csv` and `manifests/kws.csv` in
# the authors' schema (IvLabs/AIP-Speech): 61 stimuli per item (clean + 20 backgrounds × 10, 5 and
# 0 dB SNR), ids `<item>_clean` / `<item>_<background>_snr<N>`, seeds counting rows from 0 (ASR) and
# 10000 (KWS). No audio is written: every stimulus is mixed on the fly by
# `aiplib.mixing.materialize(row)` with the authors' formula. `bg_active` marks rows whose background
# segment is digital silence. Existing manifests are kept.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
snrs: list[int] = [10, 5, 0]  # SNRs in dB (integers)
overwrite: bool = False

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.manifests import build_manifests

manifests = build_manifests(ws, snrs=snrs, overwrite=overwrite)
{family: (len(df), df.groupby("speech_id").size().unique().tolist(),
          int((df["bg_active"] == False).sum())) for family, df in manifests.items()}  # noqa: E712

# %%
manifests["asr"].head()
