"""One batch of stage 7: materialise its stimuli, decode them with one prompt, shape the rows.

A stimulus that cannot be materialised, and a generation that raises, become error rows
(``raw = "__ERROR__"`` with the reason); a failing batch is retried item by item.
"""

from __future__ import annotations

import time

import numpy as np

from aiplib.inference.run_records import short_error as _short
from aiplib.io.formats import ERROR_RESPONSE, EXTRA_FIELDS
from aiplib.stimuli.families import materialize


def mix_batch(batch: list[dict], ws, max_samples: int) -> list[tuple]:
    """(record, float32 audio cut to ``max_samples`` or None, MixInfo or None, error or None) per
    manifest row (:func:`aiplib.stimuli.families.materialize`)."""
    out = []
    for r in batch:
        try:
            y, info = materialize(r, ws)
            out.append((r, np.asarray(y, dtype=np.float32)[:max_samples], info, None))
        except Exception as exc:  # noqa: BLE001 - a bad stimulus becomes an error row
            out.append((r, None, None, "materialize: " + _short(exc)))
    return out


def output_row(work: dict) -> dict:
    """The JSONL row in the authors' format: manifest columns, raw, model, task, then ours; a
    failure: id, raw="__ERROR__", error, model, task, then ours."""
    extras = {k: work[k] for k in EXTRA_FIELDS}
    if work["error"] is not None:
        return {
            "id": work["manifest"]["id"],
            "raw": ERROR_RESPONSE,
            "error": work["error"],
            "model": work["model"],
            "task": work["task"],
            **extras,
        }
    return {
        **work["manifest"],
        "raw": work["raw"],
        "model": work["model"],
        "task": work["task"],
        **extras,
    }


def generate_into(rec, rows: list[dict], audios: list[np.ndarray], prompt: str) -> None:
    """Fill ``raw``/``decode_s`` (or ``error``) of ``rows``; a failing batch is retried item
    by item so one bad stimulus does not fail its neighbours."""
    t = time.perf_counter()
    try:
        out = rec.generate(audios, [prompt] * len(audios))
        if len(out) != len(audios):
            raise RuntimeError(f"backend returned {len(out)} responses for {len(audios)} inputs")
        share = (time.perf_counter() - t) / len(audios)
        for r, text in zip(rows, out):
            r.update(raw=str(text), decode_s=round(share, 4), batch_size=len(audios), error=None)
        return
    except Exception as exc:  # noqa: BLE001
        if len(audios) == 1:
            rows[0].update(
                raw=ERROR_RESPONSE,
                error="generate: " + _short(exc),
                batch_size=1,
                decode_s=round(time.perf_counter() - t, 4),
            )
            return
    for r, y in zip(rows, audios):
        generate_into(rec, [r], [y], prompt)
