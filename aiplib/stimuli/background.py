"""The ``background`` condition family: the paper's battery, a recording added at an SNR.

Its stimuli are the authors' own: the manifest of :func:`aiplib.stimuli.manifests.build_manifest`
(:func:`manifest_plan` is None), the mixer of :func:`aiplib.stimuli.mixing.mix_row` and the resume
key of the background rows (:func:`key_fields` is None). It has no score columns of its own and its
tables are the paper's (:mod:`aiplib.analysis.conditions`).
"""

from __future__ import annotations

from aiplib.stimuli.manifests import FamilyOptions


def manifest_plan(ws, task, options: FamilyOptions) -> None:
    """None: the background manifest is the authors'
    (:func:`aiplib.stimuli.manifests.build_manifest`)."""
    return None


def key_fields(row, rec, ws, hashes) -> None:
    """None: a background row keeps the authors' resume key
    (:func:`aiplib.inference.keys.stimulus_base`)."""
    return None
