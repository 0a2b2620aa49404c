"""The condition families and their one interface.

``background`` is the paper's battery (:mod:`aiplib.stimuli.background`), ``competing_speech``
mixes the target with other talkers (:mod:`aiplib.stimuli.competing`), ``channel`` passes the clean
speech through a phone / codec / room transform (:mod:`aiplib.stimuli.channel`). A *suite* is the
families one run covers (``make all SUITE=background,channel``; default ``background``).

The mixer, manifests, resume keys, scoring and tables look up each family's hooks in
:data:`FAMILY_MODULES`:

``NAME``, ``COLUMNS``, ``SEED_START``
    The ``condition_family`` value, the manifest columns after
    :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS`, the first seed per task.
``manifest_plan(ws, task, **options)``
    Stage 5: a :class:`aiplib.stimuli.manifests.ManifestPlan` (None: the authors' manifest).
``row_components(row, ws)``
    Materialise a noisy row (:func:`mix_components`).
``key_fields(row, rec, ws, hashes)``
    Stage 7: the fields the resume key adds for a noisy row (None: the authors' key).
``score_columns(out, task_family)``, ``sidecar(df, task_family)``, ``SCORE_TYPES``
    Stage 8: the family's own score columns, sidecar fields and their types when read back.
``TABLE``, ``conditions(rows, *, distractors)``
    Notebook 09: what :func:`aiplib.analysis.family_results.family_table` reads (None: no family
    table, scored by stage 8 itself) and the family's entries in the list of conditions.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiplib.core.tasks import CONDITION_FAMILIES, check_family
from aiplib.io.audio import SR, write_wav
from aiplib.stimuli import background, channel, competing
from aiplib.stimuli.mixing import is_clean_row, mix_row

FAMILY_MODULES = {m.NAME: m for m in (background, competing, channel)}
"""Condition family name → its module (the hooks above), in
:data:`aiplib.core.tasks.CONDITION_FAMILIES` order."""
assert tuple(FAMILY_MODULES) == tuple(CONDITION_FAMILIES)

FAMILY_COLUMNS = {name: m.COLUMNS for name, m in FAMILY_MODULES.items()}
"""Columns a family's manifest has after :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS`, in
order."""

SCORE_COLUMNS = [
    "condition_family",
    *(
        c
        for c in dict.fromkeys(c for m in FAMILY_MODULES.values() for c in m.COLUMNS)
        if c != "condition_params"
    ),
    "condition_params",
]
"""Manifest columns copied into a family's score rows (those present)."""


def row_family(row) -> str:
    """The condition family of a manifest row: its ``condition_family``; ``background`` when the
    column is absent or empty (the authors' rows)."""
    v = str(
        row.get("condition_family") if hasattr(row, "get") else ""
    ).strip()  # None, NaN, <NA> read as empty
    return v if v and v.lower() not in ("nan", "<na>", "none") else "background"


def mix_components(row: Mapping, ws) -> dict:
    """Materialise a manifest row and return its parts as mixed: a clean row of any family with
    :func:`aiplib.stimuli.mixing.mix_row`, a noisy row with its family's ``row_components`` hook.

    Returns
    -------
    dict
        ``mixture`` (float32 (n,), as :func:`materialize`), ``speech`` (float32 (n,), the normalised
        speech as in the mixture), ``background`` (float32 (n,), what was added; zeros for clean),
        ``info`` (:class:`aiplib.stimuli.mixing.MixInfo`); family rows add ``detail`` (the family's
        info).

    Raises
    ------
    AiplibParameterError
        An incomplete row, or an unknown ``condition_family``.
    """
    return (
        mix_row(row, ws)
        if is_clean_row(row)
        else FAMILY_MODULES[check_family(row_family(row))].row_components(row, ws)
    )


def materialize(row: Mapping, ws, *, write=None):
    """The exact samples of one manifest row (a stimulus), mixed on the fly, bit for bit the same
    every time (a row of the authors' schema works: the background offset follows from ``seed``).

    Parameters
    ----------
    row : Mapping
        A manifest row (``speech_path``, ``condition`` / ``background_id`` and, for a noisy
        background row, ``bg_path``, ``snr_db`` in dB and ``seed``).
    ws : aiplib.core.workspace.Workspace
    write : str or Path, optional
        Also write the stimulus to this WAV file (float32).

    Returns
    -------
    y : np.ndarray [shape=(n,)], float32, 16 kHz
    info : MixInfo

    Raises
    ------
    AudioFileError
        If a file is missing or unreadable, or the speech is shorter than 0.4 s.
    AiplibParameterError
        If the row is incomplete.
    """
    parts = mix_components(row, ws)
    if write is not None:
        write_wav(write, parts["mixture"], sr=SR)
    return parts["mixture"], parts["info"]
