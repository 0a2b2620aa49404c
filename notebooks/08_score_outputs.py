# %% [markdown]
# # 8 · Scoring
#
# **What the authors did.** `scripts/06_score_metrics.py` and `scoring/score_all.py`
# (IvLabs/AIP-Speech) normalise each response and reference and compute the WER per utterance
# (ASR), and for KWS take the first word of the answer that is in the closed keyword set (a probe
# clip is correct when the answer is none of them).
# **What we do.** The same rules (`aiplib.core.textnorm`, `aiplib.scoring.score`), with Whisper's English
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
# `inference/<model>/<task>.jsonl` (`aiplib.inference.shards.merge_all`, the same as `make merge`): two
# different answers for one stimulus stop the stage, and so does a shard still running.
#
# **Condition families** (`suite`): `background` is the battery above; for the other
# families of the suite whose manifests exist (`competing_speech`, `channel`) the same scoring runs
# on `inference/<family>/` and writes `results/scores/<family>/<task>.csv`, pairing each row with
# its item's clean row of the same family; competing-speech rows also get the leakage of the
# distractor's words and its floor (`aiplib.scoring.families`). The default suite scores the
# background battery only, as before.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
inference_dir: str = ""  # empty: this workspace's inference/
manifests_dir: str = ""  # empty: this workspace's manifests/
suite: str = "background"  # condition families: background | competing_speech | channel | comma list | all
response_cleanup: str = "none"  # none (answers as generated) | authors_stage6 (their _clean_hyp)
null_answer: str = ""  # a JSON null answer: failed | text_none; empty: by profile (paper text_none)

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.inference.shards import merge_all, summary_line

if not inference_dir:  # a folder written elsewhere is only read, never changed
    merged = merge_all(ws.inference)
    if merged:
        print(f"{sum(r['rows_added'] for r in merged)} rows merged from stage-7 shard files:")
    print(summary_line(merged, ws.inference))

# %%
from aiplib.scoring.families import score_families, suite_families
from aiplib.scoring.score import score_inference

from aiplib.scoring.score import answer_rules, scoring_rules

rules = scoring_rules(profile, response_cleanup=response_cleanup, null_answer=null_answer)
for name, rule in answer_rules(rules).items():
    print(f"{name}: {rule['name']} ({rule['rule']})")
families = suite_families(suite)
scores = {}
if "background" in families or inference_dir:
    scores = score_inference(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None,
                             **rules)
{task: len(df) for task, df in scores.items()}

# %%
from aiplib.scoring.failures import failure_sentence, write_failure_tables

# stimuli left out (recogniser failures, no answer): per model × task, and each one, in results/tables/
left_out, _ = write_failure_tables(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None,
                                   null_answer=rules["null_answer"])
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

# %% [markdown]
# ## Coverage
# How much of its manifest each condition family × model × task scored (`results/tables/coverage.csv`:
# stimuli, items, backgrounds and SNRs covered of the manifest's). A `limit`, a stopped run or shards
# not merged cover part of it: each such run gets one `partial run:` line (on the terminal too, under
# `make`), and stage 9 repeats it and marks the figures and tables that need every background or item.

# %%
import sys

from aiplib.scoring.coverage import partial_lines, write_coverage

coverage = write_coverage(ws, {"background": scores, **family_scores}, manifests_dir=manifests_dir or None)
for line in partial_lines(coverage):  # on stderr, which `make` shows as the stage runs
    print(line, file=sys.stderr)
if coverage["complete"].all():
    print(f"every model × task covers its manifest ({len(coverage)} rows)")
coverage

# %% [markdown]
# ## The rules on one row
# **WER** (the paper's): both texts normalised (lower-case, each ASCII punctuation character → space,
# white space collapsed), aligned word by word (jiwer), WER = (S + D + I) / N with N the reference's
# words. **KWS**: the answer's first word, lower-cased and stripped of punctuation (`silence` when the
# answer is empty), is correct when it is the clip's keyword (a target clip) or none of the keywords
# (a non-target clip). One noisy ASR row with errors and one KWS row, scored here beside the scores.

# %%
import string

import jiwer
from aiplib.core.textnorm import normalize_text
from aiplib.io.formats import read_item_bank_keywords

shown = {}
if "asr" in scores and len(scores["asr"]):
    a = scores["asr"]
    ok = (a["ref_norm"].str.len() > 0) & (a["hyp_norm"].str.len() > 0)
    pick = a[ok & (a["bg_id"] != "clean") & (a["wer"] > 0)]
    r = (pick if len(pick) else a[ok]).iloc[0]
    ref, hyp = normalize_text(r["reference"]), normalize_text(r["response"])
    m = jiwer.process_words(ref, hyp)
    n_ref = m.hits + m.substitutions + m.deletions
    shown["ASR"] = {"stimulus": f"{r['model']} / {r['stimulus_id']}", "reference": r["reference"],
                    "response": r["response"], "reference, normalised": ref, "response, normalised": hyp,
                    "S, D, I / N": f"{m.substitutions}, {m.deletions}, {m.insertions} / {n_ref}",
                    "rule: WER = (S + D + I) / N": f"{(m.substitutions + m.deletions + m.insertions) / n_ref:.4f}",
                    "scores: wer": f"{r['wer']:.4f}"}
if "kws" in scores and len(scores["kws"]):
    k = scores["kws"]
    r = k[k["bg_id"] != "clean"].iloc[0] if (k["bg_id"] != "clean").any() else k.iloc[0]
    text = r["response"].lower().strip() if isinstance(r["response"], str) else ""
    first = (text.split()[0] if text else "silence").strip(string.punctuation)
    rule = first == str(r["label"]).lower().strip().strip(string.punctuation) if r["is_target"] else first not in set(read_item_bank_keywords(ws))
    shown["KWS"] = {"stimulus": f"{r['model']} / {r['stimulus_id']}", "reference": r["label"],
                    "response": r["response"], "first word": first,
                    "clip": "target" if r["is_target"] else "non-target",
                    "rule: correct": int(rule), "scores: correct": int(r["correct"])}
pd.DataFrame(shown).fillna("")

# %% [markdown]
# ## Checks
# The rules, recomputed outside the scorer. ASR: a noisy row with errors (else the first row with a
# reference) has as WER jiwer's WER of its two normalised texts, and as ΔWER the difference from
# its item's clean row. KWS, on the first 200 rows: `correct` is the paper's rule (the answer's
# first word, lower-cased and stripped of ASCII punctuation, `silence` when empty; a target clip is
# correct when that word is the clip's, a non-target clip when it is none of the keywords).

# %%
import string

import jiwer
import numpy as np
from aiplib.io.formats import read_item_bank_keywords
from aiplib.core.textnorm import normalize_text

if "asr" not in scores or scores["asr"].empty:
    print("no ASR scores to check in this run")
else:
    asr = scores["asr"]
    has_ref = asr["ref_norm"].str.len() > 0  # an empty reference has no WER (counted by the scorer)
    shown = asr[has_ref & (asr["bg_id"] != "clean") & (asr["hyp_norm"].str.len() > 0)]
    shown = shown[shown["wer"] > 0] if (shown["wer"] > 0).any() else shown  # a row with errors shows more
    r = (shown if len(shown) else asr[has_ref]).iloc[0]
    assert r["ref_norm"] == normalize_text(r["reference"]), f"{r['stimulus_id']}: ref_norm is not normalize_text(reference)"
    expect = jiwer.wer(r["ref_norm"], r["hyp_norm"]) if r["ref_norm"] and r["hyp_norm"] else float(bool(r["ref_norm"]))
    assert np.isclose(r["wer"], expect, rtol=0, atol=1e-12), (f"{r['model']}/{r['stimulus_id']}: WER {r['wer']} in the "
                                                             f"scores, jiwer gives {expect} on {r['ref_norm']!r} / {r['hyp_norm']!r}")
    clean = asr[(asr["model"] == r["model"]) & (asr["item_id"] == r["item_id"]) & (asr["bg_id"] == "clean")]
    if len(clean) and r["bg_id"] != "clean":
        assert np.isclose(r["delta_wer"], r["wer"] - clean["wer"].iloc[-1], equal_nan=True), \
            f"{r['model']}/{r['stimulus_id']}: ΔWER {r['delta_wer']} is not WER {r['wer']} − clean {clean['wer'].iloc[-1]}"
    print(f"ASR {r['model']}/{r['stimulus_id']}: jiwer WER {expect:.4f} = scored {r['wer']:.4f}")
if "kws" not in scores or scores["kws"].empty:
    print("no KWS scores to check in this run")
else:
    keywords = set(read_item_bank_keywords(ws))
    for r in scores["kws"].head(200).itertuples():
        answer = getattr(r, "response_scored", r.response)  # the answer after the clean-up rule, if any
        text = "" if not isinstance(answer, str) else answer.lower().strip()
        first = (text.split()[0] if text else "silence").strip(string.punctuation)
        correct = first == str(r.label).lower().strip().strip(string.punctuation) if r.is_target else first not in keywords
        assert int(correct) == r.correct, (f"{r.model}/{r.stimulus_id}: answer {answer!r} → first word {first!r}, "
                                           f"{'target' if r.is_target else 'non-target'} {r.label!r}: the rule gives "
                                           f"{int(correct)}, the scores {r.correct}")
    print(f"KWS: the first-word rule gives the scored `correct` on the first {min(200, len(scores['kws']))} rows "
          f"(e.g. {r.stimulus_id}: {answer!r} → {first!r}, correct {r.correct})")
