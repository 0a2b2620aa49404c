# %% [markdown]
# # 8 · Scoring
#
# **What the authors did.** `scripts/06_score_metrics.py` and `scoring/score_all.py`
# (IvLabs/AIP-Speech) normalise each response and reference and compute the WER per utterance
# (ASR), and for KWS take the first word of the answer that is in the closed keyword set (a probe
# clip is correct when the answer is none of them).
# **What we do.** The same rules (`aiplib.textnorm`, `aiplib.scoring`), with Whisper's English
# normaliser WER beside them (`wer_whisper`), the substitution / deletion / insertion split,
# looping transcripts and KWS non-answers flagged per row. ΔWER = WER(noisy) − WER(clean) of the
# same item and Δacc = acc(clean) − acc(noisy): positive means the background hurt. Failed
# generations are left out and counted.
#
# `inference_dir` scores a folder of inference files written elsewhere (e.g. the authors' published
# `inference/`; `make score INFERENCE_DIR=…`), `manifests_dir` its manifests (optional: their rows
# carry the manifest columns). **Reads** `inference/*/*.jsonl` and the manifests. **Writes**
# `results/scores/<task>.csv` (one row per stimulus and model) and a JSON sidecar.
#
# First, if stage 7 ran as shards (`SHARD=i/n`, a Slurm job array), their files are merged into
# `inference/<model>/<task>.jsonl` (`aiplib.shards.merge_all`, the same as `make merge`): two
# different answers for one stimulus stop the stage, and so does a shard still running.
#
# **Condition families** (`suite`, issue 14): `background` is the battery above; for the other
# families of the suite whose manifests exist (`competing_speech`, `channel`) the same scoring runs
# on `inference/<family>/` and writes `results/scores/<family>/<task>.csv`, pairing each row with
# its item's clean row of the same family; competing-speech rows also get the leakage of the
# distractor's words and its floor (`aiplib.family_scoring`). The default suite scores the
# background battery only, as before.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
inference_dir: str = ""  # empty: this workspace's inference/
manifests_dir: str = ""  # empty: this workspace's manifests/
suite: str = "background"  # condition families: background | competing_speech | channel | comma list | all

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.shards import merge_all, summary_line

if not inference_dir:  # a folder written elsewhere is only read, never changed
    merged = merge_all(ws.inference)
    if merged:
        print(f"{sum(r['rows_added'] for r in merged)} rows merged from stage-7 shard files:")
    print(summary_line(merged, ws.inference))

# %%
from aiplib.family_scoring import score_families, suite_families
from aiplib.scoring import score_inference

families = suite_families(suite)
scores = (score_inference(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None)
          if "background" in families or inference_dir else {})
{task: len(df) for task, df in scores.items()}

# %%
from aiplib.failures import failure_sentence, write_failure_tables

# stimuli left out (recogniser failures, no answer): per model × task, and each one, in results/tables/
left_out, _ = write_failure_tables(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None)
print(failure_sentence(left_out))
left_out

# %%
for task, df in scores.items():
    col = "wer" if "wer" in df else "correct"
    display(df.assign(snr=df["snr_db"].fillna(99)).groupby(["model", "snr"])[col].mean().unstack().round(3))

# %% [markdown]
# An excerpt of the ASR scores: reference, response, WER and ΔWER of the first noisy stimuli.

# %%
import pandas as pd

cols = [c for c in ("model", "stimulus_id", "bg_id", "snr_db", "reference", "response", "wer", "delta_wer")
        if c in scores.get("asr", pd.DataFrame()).columns]
scores["asr"][scores["asr"]["bg_id"] != "clean"][cols].head(8) if "asr" in scores else None

# %% [markdown]
# The other condition families of the suite (nothing to do for the default suite, `background`).

# %%
family_scores = score_families(ws, suite)
{cf: {task: len(df) for task, df in by_task.items()} for cf, by_task in family_scores.items()}
