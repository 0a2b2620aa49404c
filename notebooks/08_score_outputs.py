# %% [markdown]
# # 8 · Scoring
#
# **Reads** `inference/*/*.jsonl` and the manifests. **Writes** `results/scores/<task>.csv`: per
# stimulus the WER on normalised text (Whisper's English normaliser) and ΔWER = WER(noisy) −
# WER(clean) of the same item, or, for keyword spotting, correctness under the closed-set first-word
# rule and Δacc = acc(clean) − acc(noisy). Failed generations are left out and counted.
# `inference_dir` scores a folder of inference files written elsewhere (e.g. the authors' published
# `inference/`; `make score INFERENCE_DIR=…`), `manifests_dir` its manifests (optional: their rows
# carry the manifest columns).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
inference_dir: str = ""  # empty: this workspace's inference/
manifests_dir: str = ""  # empty: this workspace's manifests/

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.scoring import score_inference

scores = score_inference(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None)
{task: len(df) for task, df in scores.items()}

# %%
for task, df in scores.items():
    col = "wer" if "wer" in df else "correct"
    display(df.assign(snr=df["snr_db"].fillna(99)).groupby(["model", "snr"])[col].mean().unstack().round(3))
