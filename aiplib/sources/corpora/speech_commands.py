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

#: Download record of Speech Commands v0.02.
CORPUS = corpus_record("speech_commands")

#: Folder (inside the corpus folder) the archive is extracted into: ``<word>/*.wav``.
ROOT = "speech_commands_v0.02"


#: Split name → the list file of the corpus naming its clips (``train`` is every other clip).
SPLIT_LISTS = {"test": "testing_list.txt", "validation": "validation_list.txt"}


def _listed(root: Path, list_name: str) -> set[str]:
    """The clip paths (``<word>/<file>.wav``) named by the list file ``root/list_name``."""
    return set((root / list_name).read_text(encoding="utf-8").split())


def _split_rels(root: Path, rels: list[str], split: str) -> list[str]:
    """The clips of ``rels`` in ``split`` (``test``, ``validation`` or ``train``), in order."""
    if split in SPLIT_LISTS:
        lf = root / SPLIT_LISTS[split]
        if not lf.is_file():
            raise CorpusError(f"Speech Commands list {lf} is missing; run stage 1 again")
        keep = _listed(root, SPLIT_LISTS[split])
        return [r for r in rels if r in keep]
    if split == "train":
        held = set()
        for name in SPLIT_LISTS.values():
            if (root / name).is_file():
                held |= _listed(root, name)
        return [r for r in rels if r not in held]
    raise AiplibParameterError(f"split must be test, validation, train or None, got {split!r}")


def prepare_speech_commands(corpus_dir, *, split: str | None = "test") -> pd.DataFrame:
    """Speech Commands v0.02 clips [6]_ under ``corpus_dir/speech_commands_v0.02/`` (``label,
    speaker, rel, path, is_target``, sorted by ``rel``; ``_background_noise_`` left out). ``split``:
    ``test`` / ``validation`` (``testing_list.txt`` / ``validation_list.txt``), ``train`` (the
    rest), None (all).

    Raises
    ------
    CorpusError
        If the folder or the list file needed for ``split`` is missing.
    AiplibParameterError
        If ``split`` is not one of the four.
    """
    root = need_dir(Path(corpus_dir) / ROOT, "Speech Commands v0.02")
    rels = sorted(
        p.relative_to(root).as_posix()
        for p in root.glob("*/*.wav")
        if p.parent.name != "_background_noise_"
    )
    if split is not None:
        rels = _split_rels(root, rels, split)
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
