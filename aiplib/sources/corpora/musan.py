"""MUSAN [4]_: music, speech and noise recordings (2 of the 20 backgrounds).

.. [4] D. Snyder, G. Chen and D. Povey, "MUSAN: A Music, Speech, and Noise Corpus",
   arXiv:1510.08484, 2015. openslr.org/17. CC BY 4.0 (per-file terms in each folder's LICENSE).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.sources.download import corpus_record, need_dir

#: Download record of MUSAN.
CORPUS = corpus_record("musan")

#: Top folder of the extracted archive, inside the corpus folder.
ROOT = "musan"


def prepare_musan(corpus_dir) -> pd.DataFrame:
    """MUSAN's recordings [4]_: ``subset`` (music/speech/noise), ``source`` (fma, librivox …),
    ``rec_id``, ``path``; CorpusError if the corpus folder is missing."""
    root = need_dir(Path(corpus_dir) / ROOT, "MUSAN")
    rows = [
        {"subset": p.parent.parent.name, "source": p.parent.name, "rec_id": p.stem, "path": str(p)}
        for p in sorted(root.glob("*/*/*.wav"))
    ]
    return pd.DataFrame(rows, columns=["subset", "source", "rec_id", "path"])
