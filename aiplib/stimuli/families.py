"""The stimuli of every condition family: stage 5's manifest rows and the mixer, through
:data:`MIXERS`.

``background`` is the paper's battery (:mod:`aiplib.stimuli.background`), ``competing_speech``
mixes the target with other talkers (:mod:`aiplib.stimuli.competing`), ``channel`` passes the clean
speech through a phone / codec / room transform (:mod:`aiplib.stimuli.channel`). A *suite* is the
families one run covers (``make all SUITE=background,channel``; default ``background``). A
family's facts (name, label, manifest columns, first seeds, SNR or not, table) are its
:data:`aiplib.core.tasks.CONDITION_FAMILIES` spec; each stage package registers its own part under
the same names (stage 1: :mod:`aiplib.sources.distractors`; stage 8:
:data:`aiplib.scoring.family_columns.FAMILY_SCORERS`; notebook 09:
:data:`aiplib.analysis.family_results.FAMILY_TABLES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from aiplib.core.tasks import CONDITION_FAMILIES, check_family
from aiplib.io.audio import SR, write_wav
from aiplib.stimuli import background, channel, competing
from aiplib.stimuli.mixing import is_clean_row, mix_row


@dataclass(frozen=True)
class FamilyMixer:
    """What stages 5 and 7 do with one condition family's stimuli.

    Attributes
    ----------
    manifest_plan : callable
        ``manifest_plan(ws, task, options) -> ManifestPlan | None``: stage 5's rows after each
        item's clean row (:class:`aiplib.stimuli.manifests.ManifestPlan`; ``options`` a
        :class:`aiplib.stimuli.manifests.FamilyOptions`); None: the authors' manifest.
    row_components : callable
        ``row_components(row, ws) -> dict``: materialise a noisy row (:func:`mix_components`).
    key_fields : callable
        ``key_fields(row, rec, ws, hashes) -> dict | None``: stage 7's resume-key fields of a noisy
        row (the files and tools its samples depend on); None: the authors' key.
    """

    manifest_plan: Callable
    row_components: Callable
    key_fields: Callable


#: Condition family name → its :class:`FamilyMixer`, in
#: :data:`aiplib.core.tasks.CONDITION_FAMILIES` order.
MIXERS: Mapping[str, FamilyMixer] = MappingProxyType(
    {
        "background": FamilyMixer(
            manifest_plan=background.manifest_plan,
            row_components=mix_row,
            key_fields=background.key_fields,
        ),
        "competing_speech": FamilyMixer(
            manifest_plan=competing.manifest_plan,
            row_components=competing.row_components,
            key_fields=competing.key_fields,
        ),
        "channel": FamilyMixer(
            manifest_plan=channel.manifest_plan,
            row_components=channel.row_components,
            key_fields=channel.key_fields,
        ),
    }
)
assert tuple(MIXERS) == tuple(CONDITION_FAMILIES)

#: What a ``condition_family`` cell holds when it is empty (read from a CSV).
_EMPTY = ("nan", "<na>", "none")


def row_family(row) -> str:
    """The condition family of a manifest row: its ``condition_family``; ``background`` when the
    column is absent or empty (the authors' rows; None, NaN, <NA> read as empty)."""
    value = ""
    if hasattr(row, "get"):
        value = str(row.get("condition_family")).strip()
    if value and value.lower() not in _EMPTY:
        return value
    return "background"


def mix_components(row: Mapping, ws) -> dict:
    """Materialise a manifest row and return its parts as mixed: a clean row of any family with
    :func:`aiplib.stimuli.mixing.mix_row`, a noisy row with its family's ``row_components``
    (:data:`MIXERS`).

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
    if is_clean_row(row):
        return mix_row(row, ws)
    family = check_family(row_family(row))
    return MIXERS[family].row_components(row, ws)


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
