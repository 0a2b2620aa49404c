# %% [markdown]
# # 10 · Listen and explore
#
# Choose a condition family, task, item, condition, SNR and model; hear the clean utterance, the
# interference as mixed and the stimulus the model heard (mixed on the fly from the manifest row),
# and see the model's response, its WER or correctness, and ΔWER against clean. The three players
# per family: **background** — clean / background segment / mixture; **competing speech** — clean
# target / distractor (its languages, transcript and whether it is the target's voice) / mixture;
# **channel** — clean / the transform's change (transformed minus clean; for a cut, the condition's
# parameters) / transformed speech.
# **Reads** the manifests, `bg/`, `raw/distractors/`, `descriptors/`, `inference/` and `results/scores/`
# of every family (whatever exists). **Writes** nothing.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %% [markdown]
# ## The worst cases, as a table
#
# Per condition family and task, the stimuli that hurt most (largest ΔWER; for keyword spotting the
# flips, correct when clean and wrong under the condition), one row per item, from `results/scores/`
# (`results/scores/<family>/` for competing speech and channel). A family without scores says
# "not run". The same rows are the explorer's worst-case table below; responses are cut after 30 words.

# %%
import pandas as pd
from aiplib.explore.data import available_tasks, worst_cases
from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.analysis.report_tables import cap_words

for cf in CONDITION_FAMILIES:
    fws = ws.with_family(cf)
    tasks = available_tasks(fws)
    scored = [t for t in tasks if fws.scores_csv(t).is_file()]
    if cf != "background" and not scored:
        print(f"\n== {cf}: not run (no scores in {fws.rel(fws.scores_dir)}/)")
        continue
    print(f"\n== {cf}")
    for task in tasks if cf == "background" else scored:
        wc = worst_cases(fws, task, 10)
        if wc.empty:
            print(f"\n{task}: " + ("no stimulus did worse than clean" if task in scored else "no scores yet (run notebooks 07 and 08)"))
            continue
        print(f"\n{task}: {len(wc)} worst case{'s' if len(wc) > 1 else ''}")
        show = wc.assign(response=wc["response"].map(lambda r: cap_words(r, 30)), **{"Δ pp": 100 * wc["delta"]})
        cols = ["condition", "item_id", "Δ pp", "reference", "response"]
        if show["model"].nunique() > 1:
            cols.insert(2, "model")
        with pd.option_context("display.max_colwidth", 120, "display.width", 200):
            print(show[cols].to_string(index=False, float_format=lambda v: f"{v:+.1f}"))

# %% [markdown]
# ## The explorer
#
# Choose a condition family and a stimulus, or click a worst case by its condition button
# ("bg03 @ 0 dB", "talker_fr @ -5 dB", "telephone"). Under papermill (`make`) the widget is not
# built: its state (the WAV bytes of the players) would be stored in the executed notebook, which
# keeps the tables above instead.

# %%
from aiplib.explore.data import under_papermill
from aiplib.explore.ui import explorer

if under_papermill():
    print("executed by papermill: open this notebook in JupyterLab (make lab) for the interactive explorer")
    ui = None
else:
    ui = explorer(ws)
ui

# %% [markdown]
# ## Checks
# Each worst-case table of the background battery holds one row per item, every one worse than
# clean (Δ > 0), largest first.

# %%
for task in available_tasks(ws):
    wc = worst_cases(ws, task, 10)
    if wc.empty:
        continue
    assert not wc.duplicated(["model", "item_id"]).any(), f"worst cases of {task}: an item appears twice"
    assert (wc["delta"] > 0).all(), f"worst cases of {task}: {wc.loc[wc['delta'] <= 0, 'item_id'].iloc[0]} is not worse than clean"
    assert wc["delta"].is_monotonic_decreasing or wc["model"].nunique() > 1, f"worst cases of {task}: not largest first"
print("worst cases: one row per item, each worse than clean, largest first")
