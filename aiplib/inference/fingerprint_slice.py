"""The fingerprint slice: a fixed set of stimuli whose transcripts show that the numbers travel.

:func:`select_slice` picks about :data:`SLICE_SIZE` stimuli from stage 5's manifests, spread over
items, backgrounds and SNRs by a seeded rule; :func:`decode_slice` materialises them and decodes
each with every prompt of its task family, as stage 7 does. The demo fingerprint
(``benchmarks/demo_fingerprint.json``) holds the transcripts of the demo's slice, and a test decodes
the slice again on whatever machine runs it (``tests/test_numerics.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibError
from aiplib.inference.batch_decode import mix_batch
from aiplib.inference.models import load_model
from aiplib.inference.models.registry import DEFAULT_MODEL
from aiplib.inference.plan import DEFAULT_DECODING
from aiplib.inference.prompts import TASKS, get_prompt_set, task_names
from aiplib.io.audio import SR

#: Stimuli in the slice (split evenly over the task families present), each decoded with every
#: task of its family: 200 transcripts on the demo.
SLICE_SIZE = 100

#: Seed of the slice's shuffle (numpy ``default_rng``); recorded in the fingerprint.
SLICE_SEED = 33

#: Columns of :func:`decode_slice`'s table, in order.
SLICE_COLUMNS = ["id", "task", "speech_id", "background_id", "snr_db", "response"]


def select_slice(
    manifests: dict[str, pd.DataFrame], n_stimuli: int = SLICE_SIZE, seed: int = SLICE_SEED
) -> pd.DataFrame:
    """About ``n_stimuli`` manifest rows spread over backgrounds, SNRs and items.

    Rule, per task family (``n_stimuli // families`` rows each): shuffle the rows with
    ``numpy.random.default_rng(seed)``; number the rows within each (background, SNR) cell in that
    order (the clean condition is one cell); take the rows in order of that number, then of the
    shuffled position, so every cell gives one row before any gives a second. The items come out
    of the shuffle, so they vary from cell to cell.

    Parameters
    ----------
    manifests
        Task family (``asr``, ``kws``) → its stage-5 manifest (columns ``id``, ``speech_id``,
        ``background_id``, ``snr_db``, …).

    Returns
    -------
    pandas.DataFrame
        The chosen manifest rows with a first column ``task_family``, sorted by family and id.

    Raises
    ------
    ValueError
        ``manifests`` is empty or ``n_stimuli`` is not positive.
    """
    if not manifests or n_stimuli <= 0:
        raise ValueError("select_slice needs at least one manifest and a positive n_stimuli")
    per_family = max(1, n_stimuli // len(manifests))
    chosen = []
    for family, manifest in manifests.items():
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(manifest))
        shuffled = manifest.iloc[order].reset_index(drop=True)
        cell = shuffled["background_id"].astype(str) + "@" + shuffled["snr_db"].astype(str)
        shuffled["_rank_in_cell"] = shuffled.groupby(cell).cumcount()
        shuffled["_position"] = np.arange(len(shuffled))
        ranked = shuffled.sort_values(["_rank_in_cell", "_position"], kind="stable")
        picked = ranked.head(per_family).drop(columns=["_rank_in_cell", "_position"])
        chosen.append(picked.assign(task_family=family))
    table = pd.concat(chosen, ignore_index=True)
    table = table[["task_family", *[c for c in table.columns if c != "task_family"]]]
    return table.sort_values(["task_family", "id"], kind="stable").reset_index(drop=True)


def decode_slice(
    ws,
    rows: pd.DataFrame,
    *,
    model: str = DEFAULT_MODEL,
    tasks="all",
    decoding: str = DEFAULT_DECODING,
    batch_size: int | None = None,
    cpu_threads: int | None = None,
    workers: int | None = None,
) -> pd.DataFrame:
    """Materialise ``rows`` (:func:`select_slice`) in workspace ``ws`` and decode each with every
    task of its family, as stage 7 does (``load_model(model, path=decoding)``, the workspace's
    prompt set, audio cut to the model's ``max_audio_s``).

    ``batch_size``, ``cpu_threads`` and ``workers`` override the recogniser's (to show they do not
    change a transcript). Returns :data:`SLICE_COLUMNS`, one row per (stimulus, task), sorted by
    task and id; ``snr_db`` as written in the manifest.
    """
    options = {"path": decoding}
    if cpu_threads is not None:
        options["cpu_threads"] = cpu_threads
    if workers is not None:
        options["workers"] = workers
    if batch_size is not None:
        options["batch_size"] = batch_size
    recogniser = load_model(model, **options)
    try:
        return _decode(ws, rows, recogniser, tasks)
    finally:
        recogniser.close()


def _decode(ws, rows: pd.DataFrame, recogniser, tasks) -> pd.DataFrame:
    prompt_set = get_prompt_set(getattr(ws, "profile", None), ws=ws)
    max_samples = int(round(recogniser.entry.max_audio_s * SR))
    batch_size = int(getattr(recogniser, "batch_size", 1) or 1)
    wanted = task_names(tasks)
    out = []
    for family, family_rows in rows.groupby("task_family", sort=True):
        records = family_rows.to_dict("records")
        audios = []
        for record, audio, _info, error in mix_batch(records, ws, max_samples):
            if error is not None:
                raise AiplibError(f"fingerprint slice stimulus {record['id']}: {error}")
            audios.append(audio)
        for task in wanted:
            if TASKS[task][0] != family:
                continue
            prompt = prompt_set.prompt(task)[1]
            for start in range(0, len(records), batch_size):
                batch = audios[start : start + batch_size]
                texts = recogniser.generate(batch, [prompt] * len(batch))
                for record, text in zip(records[start : start + batch_size], texts):
                    out.append(
                        {
                            "id": record["id"],
                            "task": task,
                            "speech_id": record["speech_id"],
                            "background_id": record["background_id"],
                            "snr_db": record["snr_db"],
                            "response": str(text),
                        }
                    )
    table = pd.DataFrame(out, columns=SLICE_COLUMNS)
    return table.sort_values(["task", "id"], kind="stable").reset_index(drop=True)
