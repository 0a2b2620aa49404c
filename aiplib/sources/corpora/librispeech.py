"""LibriSpeech [5]_ test-clean and test-other: read English speech with transcripts (ASR items).

.. [5] V. Panayotov, G. Chen, D. Povey and S. Khudanpur, "Librispeech: an ASR corpus based on
   public domain audio books", ICASSP 2015. openslr.org/12. CC BY 4.0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from aiplib.sources.download import corpus_record, need_dir

#: Download record of LibriSpeech (two archives, extracted into ``LibriSpeech/``).
CORPUS = corpus_record("librispeech")


def prepare_librispeech(
    corpus_dir, parts=("test-clean", "test-other"), *, with_duration: bool = True
) -> pd.DataFrame:
    """LibriSpeech utterances [5]_ of ``parts`` under ``corpus_dir/LibriSpeech/``: ``utt_id, part,
    speaker, chapter, text, path, duration_s`` (s, from each header when ``with_duration``), sorted
    by part and id.

    Raises
    ------
    CorpusError
        If a part's folder is missing.
    """
    rows = []
    for part in parts:
        proot = need_dir(Path(corpus_dir) / "LibriSpeech" / part, f"LibriSpeech {part}")
        for trans in sorted(proot.glob("*/*/*.trans.txt")):
            for line in trans.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                utt, _, text = line.strip().partition(" ")
                audio = trans.parent / f"{utt}.flac"
                if not audio.is_file():
                    continue
                spk, chap, _ = utt.split("-")
                rows.append(
                    {
                        "utt_id": utt,
                        "part": part,
                        "speaker": spk,
                        "chapter": chap,
                        "text": text,
                        "path": str(audio),
                        "duration_s": float(sf.info(str(audio)).duration)
                        if with_duration
                        else np.nan,
                    }
                )
    return pd.DataFrame(
        rows, columns=["utt_id", "part", "speaker", "chapter", "text", "path", "duration_s"]
    )


def read_librispeech_speakers(corpus_dir) -> dict:
    """Speaker → ``female``/``male``/``unknown`` from ``LibriSpeech/SPEAKERS.TXT`` (as the authors
    read it).

    Returns
    -------
    dict
        Empty when the file is missing.
    """
    path = Path(corpus_dir) / "LibriSpeech" / "SPEAKERS.TXT"
    out = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(";"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2:
            out[parts[0]] = {"F": "female", "M": "male"}.get(parts[1], "unknown")
    return out
