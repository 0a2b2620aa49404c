# %% [markdown]
# # 3 · The background battery
#
# **What the authors did.** `scripts/03_curate_battery.py` (IvLabs/AIP-Speech) takes 20 background
# recordings in four categories (stationary noise, transient events, music, speech-like babble —
# the paper's Table 1), loops or cuts each to 30 s and normalises it to −23 LUFS (`BG_LUFS`).
# **What we do.** The same: mono 16 kHz, tiled end to end then cut to 30 s, loudness measured and
# normalised with pyloudnorm (ITU-R BS.1770). Beside the authors' values we record the peak after
# normalisation (a `ClippingWarning` above full scale) and the share of digital silence (ESC-50
# clips are zero-padded), which stage 5 uses to flag stimuli whose background segment is silent.
#
# **Reads** the profile's background sources. **Writes** `bg/<bg_id>.wav` and
# `descriptors/battery.csv` (category, source, licence, attribution, source duration, gain, LUFS,
# peak, silent share), rebuilt on every run (seconds; the same inputs give the same bytes).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
duration_s: float = 30.0  # length of every curated background, s
target_lufs: float = -23.0  # loudness of every background, LUFS
seed: int = aiplib.DEFAULT_SEED  # seeds the synthetic controls

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.sources import pipeline
from aiplib.battery.backgrounds import curate_battery

specs = pipeline.battery_specs(ws, seed=seed)
battery = curate_battery(ws, specs, duration_s=duration_s, target_lufs=target_lufs, seed=seed)
battery[["bg_id", "category", "source_package", "licence", "source_duration_s", "lufs_after"]]

# %%
battery.groupby("category").size()

# %% [markdown]
# Loudness after normalisation, peak, samples clipped at full scale in the 16-bit file (as in the
# authors' battery) and share of digital silence per background (peak, clipped count and silent
# share are ours; a silent share above 0 means some stimuli of that background are effectively clean).

# %%
cols = [c for c in ("bg_id", "lufs_before", "gain_db", "lufs_after", "peak_after", "clipped_samples",
                    "silent_share")
        if c in battery.columns]
battery[cols].round(3)

# %% [markdown]
# ## Checks
# Every curated background is a `duration_s` 16-bit PCM WAV at 16 kHz whose loudness, measured again
# here on the file (pyloudnorm, ITU-R BS.1770-4), is `target_lufs` ± 0.5 LU, unless samples were
# clipped at full scale (they lower the loudness; counted in `clipped_samples` above).

# %%
import pyloudnorm as pyln
import soundfile as sf

for r in battery.itertuples():
    info = sf.info(str(ws.path(r.path)))
    assert info.subtype == "PCM_16" and info.samplerate == 16000 and info.channels == 1, \
        f"{r.path}: {info.subtype} at {info.samplerate} Hz, {info.channels} channels; the battery is mono 16-bit PCM at 16 kHz"
    assert info.frames == round(duration_s * 16000), f"{r.path}: {info.frames / 16000:.3f} s, not {duration_s:g} s"
    y, sr = sf.read(str(ws.path(r.path)), dtype="float64")
    lufs = pyln.Meter(sr).integrated_loudness(y)
    assert r.clipped_samples > 0 or abs(lufs - target_lufs) <= 0.5, \
        f"{r.path}: {lufs:.2f} LUFS measured, the rule is {target_lufs:g} ± 0.5 LUFS (no sample clipped)"
print(f"{len(battery)} backgrounds: {duration_s:g} s, mono 16-bit PCM at 16 kHz, {target_lufs:g} ± 0.5 LUFS "
      f"({int((battery['clipped_samples'] > 0).sum())} with clipped samples, loudness not judged)")
