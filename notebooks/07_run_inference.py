# %% [markdown]
# # 7 · Inference
#
# **What the authors did.** `scripts/05_inference.py` (IvLabs/AIP-Speech) sends every stimulus of
# each task to each model with the task's prompt (the `PROMPTS` dict: a plain ASR / KWS prompt and a
# "steering" variant, p5, telling the model to ignore the background) and stores one JSON row per
# stimulus (`id`, `raw`, the manifest columns).
# **What we do.** The same rows, written by `aiplib.inference.runner.run_suite` for every model of the
# registry (`aiplib/inference/models/registry.yaml`), plus `prompt_id`, `prompt_set`, decoding and audio
# seconds. Each stimulus is mixed on the fly; rows are appended as they are made, so a re-run
# continues where the last one stopped and retries failed generations.
#
# For Whisper-family recognisers the task prompt is passed as the decoder's *initial prompt*: it is
# text the decoder conditions on, not an instruction it follows. A steering prompt can therefore only
# act as a lexical/stylistic prior, so a Whisper RER near 1 says the prompt changed little, not that
# the model "ignored" an instruction.
#
# **Reads** the manifests and the model registry. **Writes** `inference/<model>/<task>.jsonl` and
# `inference/<model>/run_log.jsonl`; for the other condition families of `suite` the same files under
# `inference/<family>/`, and the stage-7 time per family in `checks/stage7_families.csv`.
#
# **Many GPUs.** With `shard` = `i/n` (`make 07 SHARD=i/n`, or a Slurm job array through
# `scripts/slurm/stage7.sbatch`) this run decodes only the stimuli still missing whose id hashes to
# shard `i` of `n`, into `inference/<model>/<task>.shard-<i>-of-<n>.jsonl`; `make merge` or stage 8
# folds the shards into `<task>.jsonl` and refuses two different answers for one stimulus.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
model: str = "whisper_tiny_en"  # registry id, comma list, or "all"
task: str = "all"  # asr | kws | asr_steer_p5 | kws_steer_p5 | comma list | all
decoding: str = "fast"  # embedded Whisper: fast (30 s window) | standard (30 s, transcribe) | window (15/20/30 s, opt-in)
limit: int = 0  # >0: only the first N stimuli per task (0 means all)
batch_size: int = 0  # >0: stimuli per generate() call; 0: the registry's (paper: 1 for the Speech LLMs, as the authors)
prompt_set: str = ""  # prompt set name, empty for the profile default (paper: the PROMPTS dict of the authors)
prompts_file: str = ""  # paper: local copy of the inference script of the authors, empty to fetch it by commit
shard: str = ""  # i/n: run only shard i of n (0-based, e.g. 0/4), empty for all stimuli or the Slurm array task
suite: str = "background"  # condition families: background | competing_speech | channel | comma list | all

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %% [markdown]
# The prompts: the set's name, where its texts come from (for `paper`, the authors' script, read
# with `ast` and never run) and its SHA-256 are recorded in every inference row and in `run_log.jsonl`.

# %%
import pandas as pd
from aiplib.inference.prompts import get_prompt_set, prompt_set_record

ps = get_prompt_set(prompt_set or profile, ws=ws, prompts_file=prompts_file or None)
ps_rec = prompt_set_record(ps)
print(f"prompt set {ps_rec['prompt_set']} · KWS {ps_rec['kws_answer']} · sha256 {ps_rec['sha256']}")
print("source:", ps_rec["source"])
pd.DataFrame([{"task": t, "prompt_id": v["prompt_id"], "text": v["text"]} for t, v in ps_rec["tasks"].items()])

# %%
from aiplib.inference.runner import run_suite

if smoke and not limit:
    limit = 40
summary, family_times = run_suite(ws, suite, models=model, tasks=task, decoding=decoding, limit=limit or None,
                                  batch_size=batch_size or None, prompt_set=ps, shard=shard or None)
for r in family_times.itertuples():
    print(f"stage 7 · {r.condition_family}: {r.seconds:.1f} s ({r.n_run} decodes)")
display(family_times[["condition_family", "seconds", "n_stimuli", "n_run", "n_errors"]])
summary

# %%
from aiplib.inference.runner import raise_if_not_run

raise_if_not_run(summary)  # a model that could not run (no GPU, gated weights …) fails the stage here

# %% [markdown]
# What was written: rows per condition family, model and file in `inference/` (a re-run adds only what
# is missing; shard files wait there until `make merge` or stage 8).

# %%
from aiplib.core.tasks import parse_suite
from aiplib.io.formats import quarantine_path, read_inference_jsonl


def _written(cf, p):  # the one tolerant reader: an unreadable line is counted, never an exception
    rows, n_bad = read_inference_jsonl(p)
    q = quarantine_path(p)
    return {"condition_family": cf, "model": p.parent.name, "file": p.name, "rows": len(rows),
            "unreadable_lines": n_bad, "quarantined_lines": len(read_inference_jsonl(q, require_id=False)[0])
            if q.is_file() else 0}


pd.DataFrame([_written(cf, p) for cf in parse_suite(suite) for p in sorted(ws.with_family(cf).inference.glob("*/*.jsonl"))
              if not p.name.startswith("run_log")])

# %% [markdown]
# ## Checks
# Every stimulus of the manifest has a row in each task file this run wrote: a response, or an
# `__ERROR__` row that the next run retries. A `limit` or a shard covers part of the manifest on
# purpose, and the cell then says so instead of judging.

# %%
from aiplib.io.formats import read_manifest
from aiplib.core.tasks import task_family

done = summary[summary["status"] == "done"]
if limit or shard:
    print(f"coverage not judged: this run was limited ({'limit ' + str(limit) if limit else 'shard ' + shard})")
else:
    for r in done.itertuples():
        wsf = ws.with_family(r.condition_family)
        rows, _ = read_inference_jsonl(wsf.inference_jsonl(r.model, r.task))
        wanted = set(read_manifest(wsf, task_family(r.task))["id"])
        missing = sorted(wanted - {row["id"] for row in rows})
        assert not missing, (f"{wsf.inference_jsonl(r.model, r.task)}: {len(missing)} of {len(wanted)} stimuli of the manifest "
                             f"have no row (neither a response nor __ERROR__), first {missing[0]!r}")
    print(f"{len(done)} model × task files each hold a row for every stimulus of their manifest")
