"""Stage 8's part of every condition family: the manifest columns copied into the score rows, then
each family's own columns (:data:`FAMILY_SCORERS`; competing speech: leakage,
:mod:`aiplib.scoring.leakage`).

A family's score rows pair each noisy row with the item's clean row of the same family (a row is
clean by ``condition == "clean"`` or ``background_id == "clean"``, never by its SNR: a channel row
carries the marker ``snr_db = 99``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from aiplib.core.tasks import CONDITION_FAMILIES, TASK_FAMILIES, TaskFamily
from aiplib.scoring import leakage


@dataclass(frozen=True)
class FamilyScorer:
    """What stage 8 adds for one condition family.

    Attributes
    ----------
    score_columns : callable
        ``score_columns(out, task) -> DataFrame``: the score rows ``out`` with the family's columns
        appended (``task`` an :class:`aiplib.core.tasks.TaskFamily`); None: no columns of its own.
    sidecar : callable
        ``sidecar(df, task) -> dict``: fields of the score sidecar; None: none.
    score_types : Mapping
        Column → ``"float"`` or ``"bool"``: how its score columns are typed when read back
        (:func:`aiplib.scoring.families.read_family_scores`).
    """

    score_columns: Callable | None = None
    sidecar: Callable | None = None
    score_types: Mapping = field(default_factory=dict)


#: Condition family name → its :class:`FamilyScorer`, in
#: :data:`aiplib.core.tasks.CONDITION_FAMILIES` order.
FAMILY_SCORERS: Mapping[str, FamilyScorer] = MappingProxyType(
    {
        "background": FamilyScorer(),
        "competing_speech": FamilyScorer(
            score_columns=leakage.score_columns,
            sidecar=leakage.sidecar,
            score_types=leakage.SCORE_TYPES,
        ),
        "channel": FamilyScorer(),
    }
)
assert tuple(FAMILY_SCORERS) == tuple(CONDITION_FAMILIES)


def _family_score_columns() -> list[str]:
    """``condition_family``, every family's manifest columns once (first-seen order) but
    ``condition_params``, then ``condition_params``."""
    columns = ["condition_family"]
    for spec in CONDITION_FAMILIES.values():
        for c in spec.columns:
            if c != "condition_params" and c not in columns:
                columns.append(c)
    columns.append("condition_params")
    return columns


#: Manifest columns copied into a family's score rows (those present).
FAMILY_SCORE_COLUMNS = _family_score_columns()


def _present(df: pd.DataFrame) -> list:
    """The condition families with a row in ``df``, in :data:`FAMILY_SCORERS` order."""
    values = set(df["condition_family"].astype(str))
    return [f for f in FAMILY_SCORERS if f in values]


def add_family_scores(out: pd.DataFrame, man: pd.DataFrame, task_family: str) -> pd.DataFrame:
    """Append the family columns of ``man`` and each family's own score columns.

    Parameters
    ----------
    out : pandas.DataFrame [shape=(n_rows, ...)]
        Score rows of one (model, task) as :func:`aiplib.scoring.score.score_inference` builds them
        (``item_id, bg_id, response`` and ``reference`` (ASR) or ``label`` (KWS)).
    man : pandas.DataFrame [shape=(n_rows, ...)]
        The manifest rows of ``out``, in the same order, with :data:`FAMILY_SCORE_COLUMNS`.
    task_family : str
        A key of :data:`aiplib.core.tasks.TASK_FAMILIES`.

    Returns
    -------
    pandas.DataFrame
        ``out`` with the family columns present in ``man``, then the ``score_columns`` of every
        family present (:data:`FAMILY_SCORERS`).
    """
    task: TaskFamily = TASK_FAMILIES[task_family]
    out = out.copy()
    for c in FAMILY_SCORE_COLUMNS:
        if c in man.columns:
            out[c] = man[c].to_numpy()
    for f in _present(out):
        scorer = FAMILY_SCORERS[f]
        if scorer.score_columns is not None:
            out = scorer.score_columns(out, task)
    return out


def family_sidecar(df: pd.DataFrame, task_family: str) -> dict:
    """Sidecar fields of a family's score file: ``condition_family`` (sorted list) and the fields of
    each present family's ``sidecar`` (:data:`FAMILY_SCORERS`; competing speech: the leakage
    rule)."""
    task: TaskFamily = TASK_FAMILIES[task_family]
    side = {"condition_family": sorted({str(v) for v in df["condition_family"].dropna()})}
    for f in _present(df):
        scorer = FAMILY_SCORERS[f]
        if scorer.sidecar is not None:
            side.update(scorer.sidecar(df, task))
    return side
