"""The ``background`` condition family: the paper's battery, a recording added at an SNR.

Its hooks (the interface of :data:`aiplib.stimuli.families.FAMILY_MODULES`) are the authors' own: the
manifest of :func:`aiplib.stimuli.manifests.build_manifest`, the mixer of
:func:`aiplib.stimuli.mixing.mix_row`, the resume key of the background rows, no score columns of
its own and the condition tables of :mod:`aiplib.analysis.conditions`.
"""

from __future__ import annotations

from aiplib.stimuli.manifests import SEED_START  # noqa: F401 - the family hook
from aiplib.stimuli.mixing import mix_row

NAME = "background"
COLUMNS: list[str] = []
"""No manifest columns after :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS`."""
SCORE_TYPES: dict = {}
TABLE = None
"""No family table: the background battery has Tables 2–5 and the condition tables."""

row_components = mix_row


def manifest_plan(ws, task, **options):
    """None: the background manifest is the authors'
    (:func:`aiplib.stimuli.manifests.build_manifest`)."""
    return None


def key_fields(row, rec, ws, hashes) -> None:
    """None: a background row keeps the authors' resume key
    (:func:`aiplib.inference.keys.stimulus_base`)."""
    return None


def score_columns(out, task_family):
    """No score columns of its own: ``out`` unchanged."""
    return out


def sidecar(df, task_family) -> dict:
    return {}


def conditions(rows=None, *, distractors=None) -> list:
    """No entries in the families' list of conditions (the battery has Table 1)."""
    return []
