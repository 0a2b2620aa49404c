"""MS-SNSD [2]_: the noise clips of Microsoft's Scalable Noisy Speech Dataset (5 of the 20
backgrounds).

.. [2] C. K. A. Reddy et al., "A scalable noisy speech dataset and online subjective test
   framework", Interspeech 2019. github.com/microsoft/MS-SNSD. Code MIT; noise clips from
   Freesound (CC0 1.0) and DEMAND (CC BY-SA 3.0).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from aiplib.sources.download import corpus_record, need_dir

#: Download record of MS-SNSD.
CORPUS = corpus_record("ms_snsd")

#: Top folder of the extracted archive, inside the corpus folder.
ROOT = "MS-SNSD-master"


def _noise_row(split: str, p: Path) -> dict:
    """One noise file's row: ``<type>_<index>.wav`` split into its type and index (the stem and 0
    when the name has no index)."""
    m = re.match(r"(.+?)_(\d+)$", p.stem)
    if m:
        return {"split": split, "noise_type": m.group(1), "index": int(m.group(2)), "path": str(p)}
    return {"split": split, "noise_type": p.stem, "index": 0, "path": str(p)}


def prepare_ms_snsd(corpus_dir) -> pd.DataFrame:
    """MS-SNSD's noise files [2]_, sorted: ``split`` (``noise_train``/``noise_test``),
    ``noise_type`` (``AirConditioner`` …), ``index`` (int), ``path``; CorpusError if the corpus
    folder is missing."""
    root = need_dir(Path(corpus_dir) / ROOT, "MS-SNSD")
    rows = []
    for split in ("noise_train", "noise_test"):
        for p in sorted((root / split).glob("*.wav")):
            rows.append(_noise_row(split, p))
    return pd.DataFrame(rows, columns=["split", "noise_type", "index", "path"])
