"""Stage 1 of the ``competing_speech`` condition family: the distractor table.

:func:`prepare_distractors` writes ``raw/distractors/distractors.csv``
(:data:`aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`): the demo's Debian Asterisk
prompts in other languages, decoded once to FLAC, or a user's folder of speech with its texts table.
Stage 5 (:mod:`aiplib.stimuli.competing`) draws the distractor streams from it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from aiplib.core.atomic import atomic_path
from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.io.audio import SR, load_audio
from aiplib.io.formats import write_csv_atomic, write_json_atomic
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.sources.corpora import demo

#: Decoded prompts between two writes of the index ``sources.json`` (a stop part-way keeps what is
#: done).
INDEX_EVERY = 200


def prepare_distractors(
    ws, *, distractors_dir: str = "", distractor_texts: str = "", languages=None
) -> pd.DataFrame | None:
    """Stage 1: write the distractor table ``raw/distractors/distractors.csv``.

    ``demo``: the installed Debian Asterisk prompts of ``languages`` (default
    :data:`aiplib.sources.corpora.asterisk_langs.DEMO_LANGUAGES`), decoded once to FLAC under
    ``raw/distractors/audio/``; otherwise the folder ``distractors_dir`` with its texts table
    ``distractor_texts`` (validated as custom speech), or nothing when neither is given. The demo
    then rewrites ``raw/debian_packages.csv`` with the language packs
    (:func:`aiplib.sources.corpora.demo.record_debian_packages`).

    Returns
    -------
    pandas.DataFrame or None
        The table (:data:`~aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`), or None.

    Raises
    ------
    AiplibParameterError
        Only one of ``distractors_dir`` / ``distractor_texts`` given.
    MissingPackageError
        Demo: a language's packages are not installed.
    ValidationError
        The folder or its table fails the custom speech validation.
    """
    if bool(distractors_dir) != bool(distractor_texts):
        raise AiplibParameterError(
            "competing speech needs both distractors_dir and distractor_texts "
            f"(got distractors_dir={distractors_dir!r}, distractor_texts={distractor_texts!r})"
        )
    if distractors_dir:
        table = al.folder_distractors(distractors_dir, distractor_texts)
    elif ws.profile == "demo":
        table = _decoded(ws, al.asterisk_distractors(tuple(languages or al.DEMO_LANGUAGES)))
    else:
        return None
    write_csv_atomic(table, ws.distractors_csv)  # creates the folder
    if ws.profile == "demo":  # the language packs join the record of the demo's Debian inputs
        demo.record_debian_packages(ws)
    return table


def _is_16_bit(y: np.ndarray) -> bool:
    """Whether the samples survive 16-bit PCM exactly (so a FLAC copy holds the same samples)."""
    return np.array_equal(np.round(y.astype(np.float64) * 32768.0) / 32768.0, y)


def _write_flac(y: np.ndarray, dest) -> None:
    """Write ``y`` (16 kHz) to ``dest`` as 16-bit FLAC, atomically (:func:`atomic_path`)."""
    import soundfile as sf

    with atomic_path(dest) as tmp:
        sf.write(str(tmp), y, SR, subtype="PCM_16", format="FLAC")


def _decoded(ws, table: pd.DataFrame) -> pd.DataFrame:
    """The G.722 prompts decoded once to 16-bit FLAC under ``raw/distractors/audio/``, each checked
    to hold exactly :func:`aiplib.io.audio.load_audio`'s samples (else it keeps its G.722 path);
    kept while its source's SHA-256 is the one in ``sources.json``. Returns ``table`` with ``path``
    the file used and ``source_path`` the prompt's own."""
    out = ws.raw / "distractors" / "audio"
    index_path = out / "sources.json"
    index = {}
    if index_path.is_file():
        index = json.loads(index_path.read_text())
    paths = []
    n_decoded = 0
    for did, lang, src in zip(table["distractor_id"], table["language"], table["path"]):
        dest = out / lang / f"{did}.flac"
        rel = ws.rel(dest)
        digest = file_sha256(src)
        if dest.is_file() and index.get(rel) == digest:
            paths.append(rel)
            continue
        y = load_audio(src)
        if not _is_16_bit(y):
            index.pop(rel, None)
            paths.append(src)
            continue
        _write_flac(y, dest)
        index[rel] = digest
        n_decoded += 1
        if n_decoded % INDEX_EVERY == 0:
            write_json_atomic(index, index_path)
        paths.append(rel)
    if n_decoded or not index_path.is_file():
        write_json_atomic(index, index_path)  # creates the folder
    return table.assign(source_path=table["path"], path=paths)
