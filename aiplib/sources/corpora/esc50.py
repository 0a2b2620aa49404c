"""ESC-50 [1]_: environmental sound clips (12 of the paper's 20 backgrounds).

``CORPUS`` is the download record (the GitHub archive of the master branch, extracted into
``ESC-50-master/``); :func:`prepare_esc50` reads its metadata.

.. [1] K. J. Piczak, "ESC: Dataset for Environmental Sound Classification", ACM Multimedia 2015.
   github.com/karolpiczak/ESC-50. CC BY-NC 3.0 (clips from freesound.org).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.sources.download import CorpusError, corpus_record, need_dir

#: Download record of ESC-50.
CORPUS = corpus_record("esc50")

#: Top folder of the extracted archive, inside the corpus folder.
ROOT = "ESC-50-master"


def prepare_esc50(corpus_dir) -> pd.DataFrame:
    """ESC-50's ``meta/esc50.csv`` [1]_ under ``corpus_dir/ESC-50-master/``: ``filename, fold,
    target, category, esc10, src_file, take, path`` (absolute).

    Raises
    ------
    CorpusError
        If the folder or the metadata file is missing.
    """
    root = need_dir(Path(corpus_dir) / ROOT, "ESC-50")
    meta = root / "meta" / "esc50.csv"
    if not meta.is_file():
        raise CorpusError(
            f"ESC-50 metadata {meta} is missing; run stage 1 again with force_download=True"
        )
    df = pd.read_csv(meta, dtype={"src_file": str, "take": str})
    df["path"] = [str(root / "audio" / f) for f in df["filename"]]
    return df
