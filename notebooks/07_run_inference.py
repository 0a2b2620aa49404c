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
limit: int = 0  # >0: a stratified, seeded sample of N stimuli per task (0 means all)
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
from aiplib.inference.plan import limit_note
from aiplib.inference.runner import run_suite

if smoke and not limit:
    limit = 40
if limit:
    print(limit_note(limit))
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
# ## The method on one stimulus
# One stimulus followed from its manifest row to the row written: the first noisy row of the first
# file this run wrote (an active background segment, a response rather than an error), mixed on the
# fly as stage 7 mixes it (`aiplib.stimuli.families.mix_components`, cut to the model's
# `max_audio_s`); its SNR measured here on the two parts in the mixture,
# 10 · log10(mean(s²) / mean(b²)) in dB, against the row's label (to 0.01 dB); the prompt the model
# gets (the task's text of the prompt set, none for a model that takes no prompt); the decoder's
# answer, decoded again here from that audio and prompt with the model loaded as stage 7 loads it;
# and the row in the inference file, whose answer (`raw`) must be the one shown (for the embedded
# Whisper, whose numeric path is pinned; another model's differing answer is reported as
# non-deterministic decoding). The `paper` profile
# does not load its model a second time for one stimulus (a Speech LLM on a GPU), and a model that
# does not load here (no GPU, package missing) cannot decode: then the row is shown without a
# decode, and the cell says why.

# %%
from pathlib import Path

import numpy as np
from aiplib.core.errors import AiplibError, MissingPackageError, ModelUnavailableError
from aiplib.core.tasks import CONDITION_FAMILIES, task_family
from aiplib.inference import models
from aiplib.inference.prompts import NO_PROMPT_ID
from aiplib.io.audio import SR
from aiplib.io.formats import ERROR_RESPONSE, read_manifest
from aiplib.stimuli.families import mix_components


def _shown_row(rows: list[dict]) -> dict | None:
    """Of each stimulus' last row (the one scored), the first noisy one with an active background
    and a response; else the first response."""
    last = {}
    for r in rows:
        last[r["id"]] = r
    answered = [r for r in last.values() if r.get("raw") != ERROR_RESPONSE]
    noisy = [r for r in answered
             if r.get("condition") == "noisy" and r.get("bg_active") is not False]
    return (noisy or answered or [None])[0]


def _decode_one(model_id: str, y: np.ndarray, prompt: str | None) -> tuple[str | None, str]:
    """(the decoder's answer or None, why there is none) for one stimulus, the model loaded as
    stage 7 loads it."""
    if profile == "paper":
        return None, "paper: the model is not loaded again for one stimulus; the row is stage 7's"
    try:
        rec = models.load_model(model_id, path=decoding)
    except (ModelUnavailableError, MissingPackageError) as exc:  # stage 7 may have read rows back
        return None, f"{model_id} does not load here: {exc}"
    try:
        return str(rec.generate([y], [prompt])[0]), ""
    finally:
        rec.close()


def _no_response(path, rows: list[dict]) -> str:
    """One line for a result file none of whose rows has a response: how many, the first error."""
    errors = [r.get("error") for r in rows if r.get("raw") == ERROR_RESPONSE]
    first_error = next((e for e in errors if e), "no error recorded")
    return f"{path}: none of its {len(rows)} row(s) has a response; the first error: {first_error}"


def _first_answered(files: pd.DataFrame) -> tuple:
    """(the summary row of the first file with a response, its shown row) or (None, None), and
    one line per file whose rows all lack a response (a file not written, e.g. a shard with
    nothing to decode, or without rows, is passed over)."""
    silent = []
    for _, f in files.iterrows():
        if not Path(f["file"]).is_file():
            continue
        rows = read_inference_jsonl(f["file"])[0]
        if not rows:
            continue
        row = _shown_row(rows)
        if row is not None:
            return f, row, silent
        silent.append(_no_response(f["file"], rows))
    return None, None, silent


done_files = summary[(summary["status"] == "done") & summary["file"].notna()]
first, written_row, silent_files = _first_answered(done_files)
for line in silent_files:
    print("no response:", line)
if first is None and not silent_files:
    print("no stimulus to show: no model × task file with rows was written by this run "
          f"({', '.join(sorted(set(summary['status'].astype(str))))})")
elif first is None:
    raise AiplibError(
        f"{silent_files[0]} — the model answered no stimulus (error rows are tried again when "
        "stage 7 runs again: check the model with `make models`, then re-run `make 07`)")
else:
    wsf = ws.with_family(first["condition_family"])
    man = read_manifest(wsf, task_family(first["task"]))
    man_row = man[man["id"] == written_row["id"]].iloc[0].to_dict()
    display(pd.Series(man_row).to_frame(f"manifests/{task_family(first['task'])}.csv"))

    entry = models.resolve(first["model"])[0]
    parts = mix_components(man_row, wsf)
    n_max = int(round(float(entry.max_audio_s) * SR))
    y = np.asarray(parts["mixture"], dtype=np.float32)[:n_max]
    s = parts["speech"].astype(np.float64)
    b = parts["background"].astype(np.float64)
    measured_snr = None
    has_snr = CONDITION_FAMILIES[first["condition_family"]].has_snr
    if has_snr and man_row["condition"] == "noisy" and np.any(b):
        measured_snr = float(10 * np.log10(np.mean(s ** 2) / np.mean(b ** 2)))
        assert abs(measured_snr - float(man_row["snr_db"])) <= 0.01, (
            f"{man_row['id']}: SNR {measured_snr:.3f} dB measured, the label is "
            f"{man_row['snr_db']} dB")
    # a model that takes no prompt is sent none: its rows say prompt_id "none"
    prompt_id = NO_PROMPT_ID
    prompt = None
    if entry.takes_prompt:
        prompt_id, prompt = ps.prompt(first["task"])
    assert written_row["prompt_id"] == prompt_id, (
        f"{first['file']} {written_row['id']}: prompt_id {written_row['prompt_id']}, "
        f"the set gives {prompt_id}")
    answer, no_decode = _decode_one(first["model"], y, prompt)
    shown_answer = answer
    if answer is None:
        shown_answer = f"(no decode: {no_decode})"
    stimulus_steps = pd.Series({
        "stimulus": man_row["id"],
        "audio (s), samples at 16 kHz": f"{y.size / SR:.4f}, {y.size}",
        "SNR label (dB)": man_row.get("snr_db"),
        "SNR measured here (dB)": None if measured_snr is None else round(measured_snr, 6),
        "model · task": f"{first['model']} · {first['task']}",
        "prompt": f"{prompt_id}: {prompt!r}",
        "decoder's answer, decoded here": shown_answer,
        "raw in the inference file": written_row["raw"],
    }).to_frame("value")
    shown_fields = ["id", "raw", "model", "task", "prompt_set", "prompt_id", "stim_key", "audio_s",
                    "batch_size", "decode_s"]
    file_row = pd.Series({k: written_row.get(k) for k in shown_fields})
    file_row = file_row.to_frame(Path(first["file"]).name)
    with pd.option_context("display.max_colwidth", None):  # the whole prompt and answer
        display(stimulus_steps)
        display(file_row)
    assert written_row["audio_s"] == round(y.size / SR, 4), (
        f"{written_row['id']}: audio_s {written_row['audio_s']} in the file, the mixture has "
        f"{y.size / SR:.4f} s")
    # The embedded Whisper decodes on a pinned numeric path: the same audio gives the same answer.
    # Another model (a program, an endpoint) may not: a different answer is said, not a failure.
    pinned = entry.backend == "whisper"
    if answer is None:
        print(f"{written_row['id']}: {no_decode}")
    elif answer == written_row["raw"]:
        print(f"{written_row['id']}: the decoder's answer {answer!r} is the file's")
    else:
        assert not pinned, (
            f"{first['file']} {written_row['id']}: the file holds {written_row['raw']!r}, "
            f"the decoder gives {answer!r}")
        print(f"{written_row['id']}: {first['model']} answered {answer!r} now and "
              f"{written_row['raw']!r} in stage 7: its decoding is not deterministic")

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
