"""Google Speech Commands v0.02 [6]_: one-second spoken words (KWS items).

.. [6] P. Warden, "Speech Commands: A Dataset for Limited-Vocabulary Speech Recognition",
   arXiv:1804.03209, 2018. CC BY 4.0.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import KEYWORDS  # the ten Speech Commands keywords (targets)
from aiplib.sources.download import CorpusError, corpus_record, need_dir

CORPUS = corpus_record("speech_commands")  # download record of Speech Commands v0.02

# Folder (inside the corpus folder) the archive is extracted into: ``<word>/*.wav``.
ROOT = "speech_commands_v0.02"


def prepare_speech_commands(corpus_dir, *, split: str | None = "test") -> pd.DataFrame:
    """Speech Commands v0.02 clips [6]_ under ``corpus_dir/speech_commands_v0.02/`` (``label,
    speaker, rel, path, is_target``, sorted by ``rel``; ``_background_noise_`` left out). ``split``:
    ``test`` / ``validation`` (``testing_list.txt`` / ``validation_list.txt``), ``train`` (the
    rest), None (all).

    Raises
    ------
    CorpusError
        If the folder or the list file needed for ``split`` is missing.
    """
    root = need_dir(Path(corpus_dir) / ROOT, "Speech Commands v0.02")
    rels = sorted(
        p.relative_to(root).as_posix()
        for p in root.glob("*/*.wav")
        if p.parent.name != "_background_noise_"
    )
    if split is not None:
        lists = {"test": "testing_list.txt", "validation": "validation_list.txt"}
        if split in lists:
            lf = root / lists[split]
            if not lf.is_file():
                raise CorpusError(f"Speech Commands list {lf} is missing; run stage 1 again")
            keep = set(lf.read_text(encoding="utf-8").split())
            rels = [r for r in rels if r in keep]
        elif split == "train":
            held = {
                r
                for name in lists.values()
                if (root / name).is_file()
                for r in (root / name).read_text(encoding="utf-8").split()
            }
            rels = [r for r in rels if r not in held]
        else:
            raise AiplibParameterError(
                f"split must be test, validation, train or None, got {split!r}"
            )
    rows = [
        {
            "label": r.split("/")[0],
            "speaker": Path(r).stem.split("_nohash_")[0],
            "rel": r,
            "path": str(root / r),
            "is_target": r.split("/")[0] in KEYWORDS,
        }
        for r in rels
    ]
    return pd.DataFrame(rows, columns=["label", "speaker", "rel", "path", "is_target"])
