"""Condition families (issue 14): which kinds of interference a run covers, and their plumbing.

``background`` is the paper's battery (a recording added at an SNR, :mod:`aiplib.stimuli.mixing`);
``competing_speech`` mixes the target with other talkers (:mod:`aiplib.stimuli.competing`); ``channel``
passes the clean speech through a phone / codec / room transform (:mod:`aiplib.stimuli.channel`). A *suite*
is the families one run covers (``make all SUITE=background,channel``; default ``background``, so
``make all`` does what it always did, at the same cost).

Every family has its own manifests (``manifests/<cf>/<asr|kws>.csv``, built by stage 5 with
:func:`aiplib.stimuli.family_manifests.build_family_manifest`), its own inference files
(``inference/<cf>/<model>/<task>.jsonl``) and scores (``results/scores/<cf>/``): the workspace
view :meth:`aiplib.core.workspace.Workspace.with_family` resolves those folders, so stage 7 and 8 run
on a family unchanged. ``background`` keeps today's paths.

This module: the family of a manifest row (:func:`row_family`), its samples
(:func:`mix_components`, :func:`materialize`: each family's own mixer), the distractor table of
stage 1 (:func:`prepare_distractors`). The names live in :mod:`aiplib.core.tasks`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.tasks import check_family
from aiplib.io.audio import SR, load_audio, write_wav
from aiplib.io.formats import write_csv_atomic, write_json_atomic
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.stimuli import channel, competing
from aiplib.stimuli.mixing import is_clean_row, mix_row

__all__ = ["FAMILY_COLUMNS", "FAMILY_SEED_START", "row_family", "prepare_distractors",
           "mix_components", "materialize"]

FAMILY_COLUMNS = {
    "background": [],
    "competing_speech": ["setting", "distractor_languages", "same_voice_as_target", "distractor_ids",
                         "distractor_text", "looped", "condition_params"],
    "channel": ["channel_condition", "applied_to", "condition_params"],
}
"""Columns a family's manifest has after :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS`, in order
(meanings: :func:`aiplib.stimuli.family_manifests.build_family_manifest`)."""

FAMILY_SEED_START = {("competing_speech", "asr"): 20000, ("competing_speech", "kws"): 30000,
                     ("channel", "asr"): 40000, ("channel", "kws"): 50000}
"""First seed of each family manifest's row counter (``background``: the authors' 0 / 10000,
:data:`aiplib.stimuli.manifests.SEED_START`); notebook 05's ``seed_offset`` is added to each."""


def row_family(row) -> str:
    """The condition family of a manifest row: its ``condition_family``; ``background`` when the
    column is absent or empty (the authors' rows, manifests of older versions)."""
    v = row.get("condition_family") if hasattr(row, "get") else None
    if v is None or (isinstance(v, float) and v != v):
        return "background"
    v = str(v).strip()
    return v if v and v.lower() not in ("nan", "<na>", "none") else "background"


# ------------------------------------------------------------------------- stage 1: distractors
def prepare_distractors(ws, *, distractors_dir: str = "", distractor_texts: str = "", languages=None):
    """Stage 1: write the competing-speech distractor table ``raw/distractors/distractors.csv``.

    ``demo``: the installed Debian Asterisk prompt packages of ``languages`` (default
    :data:`aiplib.sources.corpora.asterisk_langs.DEMO_LANGUAGES`, fr it ru es and en, the same language;
    :func:`~aiplib.sources.corpora.asterisk_langs.asterisk_distractors`), decoded once to FLAC under
    ``raw/distractors/audio/`` (same samples; ~3 min the first time: 1,197 files, 251 of them English). ``paper``/``custom``: the folder
    ``distractors_dir`` with its texts table ``distractor_texts``
    (:func:`~aiplib.sources.corpora.asterisk_langs.folder_distractors`, validated as custom speech); when
    neither is given nothing is written (the suite then cannot hold ``competing_speech``).

    Returns
    -------
    pandas.DataFrame or None
        The table (columns :data:`~aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`), or None
        when nothing was written.

    Raises
    ------
    AiplibParameterError
        Only one of ``distractors_dir`` / ``distractor_texts`` given.
    MissingPackageError
        Demo: a language's packages are not installed (names them and how to get them).
    ValidationError
        The folder or its table fails the custom speech validation.
    """

    if bool(distractors_dir) != bool(distractor_texts):
        raise AiplibParameterError("competing speech needs both distractors_dir and distractor_texts "
                                   f"(got distractors_dir={distractors_dir!r}, distractor_texts={distractor_texts!r})")
    if distractors_dir:
        table = al.folder_distractors(distractors_dir, distractor_texts)
    elif ws.profile == "demo":
        table = _decoded(ws, al.asterisk_distractors(tuple(languages or al.DEMO_LANGUAGES)))
    else:
        return None
    ws.distractors_csv.parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, ws.distractors_csv)
    return table


def _decoded(ws, table):
    """The Asterisk G.722 prompts decoded once to 16-bit FLAC under ``raw/distractors/audio/``.

    Reading G.722 takes an ffmpeg process (~0.1 s a file); stages 5 and 7 read each utterance many
    times. The decoder's output is 16-bit, so FLAC PCM_16 holds exactly the samples
    :func:`aiplib.io.audio.load_audio` gives for the G.722 file (checked per file; float32 FLAC is not
    possible, so a file that is not exact keeps its G.722 path). ``path`` becomes relative to the
    workspace root; ``source_path`` keeps the package's file. A decoded file is kept while the
    SHA-256 of its source file is the one recorded in ``raw/distractors/audio/sources.json``; a
    source that changed (a newer Debian package) is decoded again.
    """
    import soundfile as sf


    out = ws.raw / "distractors" / "audio"
    index_path = out / "sources.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    paths, n_decoded = [], 0
    for did, lang, src in zip(table["distractor_id"], table["language"], table["path"]):
        dest = out / lang / f"{did}.flac"
        rel = ws.rel(dest)
        digest = file_sha256(src)
        if not (dest.is_file() and index.get(rel) == digest):
            y = load_audio(src)
            if not np.array_equal(np.round(y.astype(np.float64) * 32768.0) / 32768.0, y):
                index.pop(rel, None)
                paths.append(src)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            sf.write(str(tmp), y, SR, subtype="PCM_16", format="FLAC")
            tmp.replace(dest)
            index[rel] = digest
            n_decoded += 1
            if n_decoded % 200 == 0:  # a stop part-way keeps what is done
                write_json_atomic(index, index_path)
        paths.append(rel)
    if n_decoded or not index_path.is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(index, index_path)
    return table.assign(source_path=table["path"], path=paths)


# ------------------------------------------------------------------ a row's samples
def mix_components(row: Mapping, ws) -> dict:
    """Materialise a manifest row and return its parts as mixed.

    Dispatches on the row's ``condition_family`` (:func:`row_family`; absent or
    empty: ``background``). ``background`` rows and every clean row: the authors' mixer
    (:func:`aiplib.stimuli.mixing.mix_row`). ``competing_speech``: :func:`aiplib.stimuli.competing.row_components` (``background`` is
    the scaled distractor). ``channel``: :func:`aiplib.stimuli.channel.row_components` (``background`` is
    the change the transform made, ``mixture − speech``, or zeros when it changed the length).

    Returns
    -------
    dict
        ``mixture`` (float32 (n,), identical to :func:`materialize`), ``speech`` (float32 (n,),
        the normalised speech as it is in the mixture: divided by the peak when the sum was),
        ``background`` (float32 (n,), the scaled segment as in the mixture; zeros for clean),
        ``info`` (:class:`MixInfo`); family rows add ``detail`` (the family's own info dict).

    Raises
    ------
    AiplibParameterError
        An incomplete row, or an unknown ``condition_family``.
    """
    cf = row_family(row)
    if cf == "background" or is_clean_row(row):
        return mix_row(row, ws)
    return {"competing_speech": competing.row_components, "channel": channel.row_components}[check_family(cf)](row, ws)


def materialize(row: Mapping, ws, *, write=None):
    """Return the exact samples of one manifest row (a stimulus), mixed on the fly.

    The same row always gives the same samples, bit for bit; a row of the authors' schema
    (without our extra columns such as ``bg_offset``) works: the offset follows from ``seed``.

    Parameters
    ----------
    row : Mapping
        A manifest row with ``speech_path``, ``condition`` and/or ``background_id`` and, for a
        noisy row, ``bg_path``, ``snr_db`` (dB) and ``seed`` (paths relative to the workspace
        root or absolute).
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
