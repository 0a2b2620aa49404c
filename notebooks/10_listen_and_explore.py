# %% [markdown]
# # 10 · Listen and explore
#
# Choose a task, item, background, SNR and model; hear the clean utterance, the background segment
# and the mixture the model heard (mixed on the fly from the manifest row), and see the model's
# response, its WER or correctness, and ΔWER against clean.
# **Reads** the manifests, `bg/`, `descriptors/`, `inference/` and `results/scores/` (whatever exists). **Writes** nothing.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.widgets import explorer

ui = explorer(ws)
ui
