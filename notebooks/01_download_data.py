# %% [markdown]
# # 1 · Raw data
#
# **Reads** the profile's sources — for `demo` the Debian packages of the embedded default
# (Asterisk English prompts, background sounds from game and sample packages, espeak-ng and flite
# voices); for `paper` the public corpora (ESC-50, MS-SNSD, NOISEX-92, MUSAN, LibriSpeech, Speech
# Commands); for `custom` the user's folders, validated before any work.
# **Writes** `data/<profile>/raw/` and `raw/inventory.csv` (file, package, licence, attribution).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
install: bool = True  # demo: apt-get missing Debian packages (root or sudo), else a clear message
base_urls: dict[str, str] = {}  # paper: mirrors per corpus, e.g. {"esc50": "http://mirror/esc50"}
speech_dir: str = ""  # custom: folder of utterances
texts: str = ""  # custom: CSV/TSV with file,text[,accent_group,speaker]
kws_dir: str = ""  # custom: folder of keyword clips
kws_labels: str = ""  # custom: CSV/TSV with file,label
keywords: str = "yes,no,up,down,left,right,on,off,stop,go"  # custom: the closed keyword set
backgrounds_dir: str = ""  # custom: folder of background recordings (+ optional licences.csv)

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile, create=profile != "custom")  # custom: nothing is written before validation
print(ws.root)

# %%
from aiplib import pipeline

params = dict(install=install) if profile == "demo" else {}
if profile == "paper":
    params = dict(base_urls=base_urls or None)
if profile == "custom":
    params = dict(speech_dir=speech_dir, texts=texts, kws_dir=kws_dir, kws_labels=kws_labels,
                  keywords=keywords, backgrounds_dir=backgrounds_dir)
inventory = pipeline.gather_raw(ws, **params)
inventory.groupby(inventory.columns[1]).size() if len(inventory) else inventory
