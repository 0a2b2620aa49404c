# %% [markdown]
# # 4 · Acoustic descriptors
#
# **What the authors did.** For every background they computed nine descriptors with librosa at
# 16 kHz (default frames: 2048 samples, hop 512, centred) averaged over all frames — zero crossing
# rate, spectral centroid, rolloff, bandwidth, flux (mean onset strength), flatness, contrast, the
# variance of the RMS energy — and the share of frames Silero VAD calls speech
# (`vad_classify_bg.py`, IvLabs/AIP-Speech). Stage 9 rank-correlates each descriptor with the
# degradation a background causes (Table 2, Figures 2–3).
# **What we do.** The same definitions and settings (silent frames included, their share reported
# as `silent_frame_share`); units and frame settings of each descriptor are listed below
# (`aiplib.battery.descriptors.DESCRIPTOR_INFO`).
#
# **Reads** `bg/*.wav` and `descriptors/battery.csv`. **Writes** `descriptors/acoustic_descriptors.csv`.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
vad_threshold: float = 0.5  # Silero VAD speech probability threshold
overwrite: bool = False

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.battery.descriptors import DESCRIPTOR_INFO, descriptor_table

table = descriptor_table(ws, vad_threshold=vad_threshold, overwrite=overwrite)
table.round(3)

# %%
import pandas as pd

pd.DataFrame(DESCRIPTOR_INFO, index=["unit", "meaning", "source"]).T

# %% [markdown]
# ## The rule on one background
# The spectral centroid of the first background, step by step: its WAV read at 16 kHz
# (`aiplib.io.audio.load_audio`, as the stage reads it) in float64; the magnitude STFT with the
# stage's frames (`FRAME`: 2048-sample Hann window, hop 512, centred with zero padding); in each
# frame the magnitude-weighted mean frequency Σ f·|X(f)| / Σ |X(f)| in Hz (a digitally silent
# frame gives 0 Hz); then the mean over all frames. The value in `acoustic_descriptors.csv` must be
# the same number (the CSV holds full precision; asserted to 1e-9 relative).

# %%
from pathlib import Path

import librosa
import numpy as np
from aiplib.battery.descriptors import FRAME
from aiplib.io.audio import load_audio
from aiplib.io.formats import read_battery_csv, read_descriptor_table

written = read_descriptor_table(Path(ws.descriptors) / "acoustic_descriptors.csv", index=True)
bg_row = read_battery_csv(ws.battery_csv).iloc[0]
y = load_audio(ws.path(bg_row["path"]), sr=FRAME["sr"]).astype(np.float64)
spec = np.abs(librosa.stft(y, n_fft=FRAME["n_fft"], hop_length=FRAME["hop_length"],
                           win_length=FRAME["win_length"], window=FRAME["window"],
                           center=FRAME["center"], pad_mode="constant"))  # |X(f, frame)|
freqs = librosa.fft_frequencies(sr=FRAME["sr"], n_fft=FRAME["n_fft"])  # Hz, one per STFT bin
weight = spec.sum(axis=0)  # Σ |X(f)| per frame
weight[weight < np.finfo(spec.dtype).tiny] = 1.0  # silent frame: Σ f·0 / 1 = 0 Hz
per_frame = np.sum(freqs[:, None] * (spec / weight), axis=0)  # centroid of each frame, Hz
centroid = float(np.mean(per_frame))
in_table = float(written.loc[bg_row["bg_id"], "spectral_centroid"])
display(pd.Series({"background": bg_row["bg_id"], "samples at 16 kHz": y.size,
                   "frames (1 + samples // hop)": per_frame.size,
                   "STFT bins (n_fft / 2 + 1)": freqs.size,
                   "first frame centroid (Hz)": round(float(per_frame[0]), 3),
                   "mean over frames, computed here (Hz)": repr(centroid),
                   "acoustic_descriptors.csv (Hz)": repr(in_table)}).to_frame("value"))
assert np.isclose(centroid, in_table, rtol=1e-9, atol=0), (
    f"acoustic_descriptors.csv {bg_row['bg_id']}: spectral_centroid {in_table} Hz, "
    f"computed here {centroid} Hz")
print(f"{bg_row['bg_id']}: spectral centroid {centroid:.6f} Hz here = {in_table:.6f} Hz in the "
      f"table (relative difference {abs(centroid - in_table) / in_table:.1e})")

# %% [markdown]
# ## Checks
# One row per curated background, each with the nine descriptors and every value finite.

# %%
import numpy as np
from aiplib.io.formats import read_battery_csv

bg_ids = read_battery_csv(ws.battery_csv)["bg_id"].astype(str)
assert len(DESCRIPTOR_INFO) == 9, f"{len(DESCRIPTOR_INFO)} descriptors defined, the paper has nine"
missing = [d for d in DESCRIPTOR_INFO if d not in table.columns]
assert not missing, f"acoustic_descriptors.csv lacks the descriptors {missing}"
assert sorted(table["bg_id"].astype(str)) == sorted(bg_ids), \
    (f"acoustic_descriptors.csv has {len(table)} rows for {len(bg_ids)} backgrounds; differing: "
     f"{sorted(set(bg_ids) ^ set(table['bg_id'].astype(str)))[:5]}")
values = table[list(DESCRIPTOR_INFO)].to_numpy(dtype=float)
bad = ~np.isfinite(values)
row, col = np.argwhere(bad)[0] if bad.any() else (0, 0)
assert not bad.any(), f"acoustic_descriptors.csv {table['bg_id'].iloc[row]}: {list(DESCRIPTOR_INFO)[col]} is not finite"
print(f"{len(table)} backgrounds × {len(DESCRIPTOR_INFO)} descriptors, all finite")
