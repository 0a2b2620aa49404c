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

# %% [markdown]
# ## The worst cases, as a table
#
# Per task, the stimuli that hurt most (largest ΔWER; for keyword spotting the flips, correct when
# clean and wrong with the background), one row per item, from `results/scores/`. The same rows are
# the explorer's worst-case table below; responses are cut after 30 words.

# %%
import pandas as pd
from aiplib.explore import available_tasks, worst_cases
from aiplib.report_tables import cap_words

for task in available_tasks(ws):
    wc = worst_cases(ws, task, 10)
    print(f"\n{task}: " + ("no scores yet (run notebooks 07 and 08)" if wc.empty else f"{len(wc)} worst case{'s' if len(wc) > 1 else ''}"))
    if not wc.empty:
        show = wc.assign(response=wc["response"].map(lambda r: cap_words(r, 30)))
        cols = ["condition", "item_id", "delta", "reference", "response"]
        if show["model"].nunique() > 1:
            cols.insert(2, "model")
        with pd.option_context("display.max_colwidth", 120, "display.width", 200):
            print(show[cols].to_string(index=False, float_format=lambda v: f"{v:+.2f}"))

# %% [markdown]
# ## The explorer
#
# Choose a stimulus, or click a worst case by its "background @ SNR" button. Under papermill (`make`)
# the widget is not built: its state (the WAV bytes of the players) would be stored in the executed
# notebook, which keeps the tables above instead.

# %%
from aiplib.explore import under_papermill
from aiplib.widgets import explorer

if under_papermill():
    print("executed by papermill: open this notebook in JupyterLab (make lab) for the interactive explorer")
    ui = None
else:
    ui = explorer(ws)
ui
