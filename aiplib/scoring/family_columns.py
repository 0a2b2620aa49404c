"""Stage 8's columns of the condition families: the manifest columns copied, then each family's own
(its ``score_columns`` hook, :data:`aiplib.stimuli.families.FAMILY_MODULES`; competing speech: leakage).

A family's score rows pair each noisy row with the item's clean row of the same family (a row is
clean by ``condition == "clean"`` or ``background_id == "clean"``, never by its SNR: a channel row
carries the marker ``snr_db = 99``).
"""

from __future__ import annotations

import pandas as pd

from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.stimuli.families import FAMILY_MODULES as _REGISTRY
from aiplib.stimuli.families import SCORE_COLUMNS

TABLE_FAMILIES = tuple(f for f in CONDITION_FAMILIES if _REGISTRY[f].TABLE is not None)
"""The condition families with a table of their own (all but ``background``), in report order."""

FAMILY_SCORE_COLUMNS = SCORE_COLUMNS
"""Manifest columns copied into a family's score rows (those present)."""


def _present(df: pd.DataFrame) -> list:
    return [f for f in _REGISTRY if f in set(df["condition_family"].astype(str))]


def add_family_scores(out: pd.DataFrame, man: pd.DataFrame, task_family: str) -> pd.DataFrame:
    """Append the family columns of ``man`` and each family's own score columns.

    Parameters
    ----------
    out : pandas.DataFrame [shape=(n_rows, ...)]
        Score rows of one (model, task) as :func:`aiplib.scoring.score.score_inference` builds them
        (``item_id, bg_id, response`` and ``reference`` (ASR) or ``label`` (KWS)).
    man : pandas.DataFrame [shape=(n_rows, ...)]
        The manifest rows of ``out``, in the same order, with :data:`FAMILY_SCORE_COLUMNS`.
    task_family : {"asr", "kws"}

    Returns
    -------
    pandas.DataFrame
        ``out`` with the family columns present in ``man``, then the ``score_columns`` hook's
        columns of every family present.
    """
    out = out.copy()
    for c in [c for c in FAMILY_SCORE_COLUMNS if c in man.columns]:
        out[c] = man[c].to_numpy()
    for f in _present(out):
        out = _REGISTRY[f].score_columns(out, task_family)
    return out


def family_sidecar(df: pd.DataFrame, task_family: str) -> dict:
    """Sidecar fields of a family's score file: ``condition_family`` (sorted list) and the fields of
    each family's ``sidecar`` hook (competing speech: the leakage rule)."""
    side = {"condition_family": sorted({str(v) for v in df["condition_family"].dropna()})}
    for f in _present(df):
        side.update(_REGISTRY[f].sidecar(df, task_family))
    return side
