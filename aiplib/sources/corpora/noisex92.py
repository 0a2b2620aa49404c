"""NOISEX-92 [3]_: the babble recording (one of the 20 backgrounds).

The file is used as downloaded (``babble.wav``, no archive), so there is no reader.

.. [3] A. Varga and H. J. M. Steeneken, "Assessment for automatic speech recognition: II.
   NOISEX-92", Speech Communication 12(3), 1993. No explicit licence; the original Rice SPIB page is
   gone, so the default is a public GitHub mirror (github.com/speechdnn/Noises, ``NoiseX-92/``).
"""
from __future__ import annotations

from aiplib.sources.download import Corpus, RemoteFile

CORPUS = Corpus(  # download record of the NOISEX-92 babble file
    name="noisex92", title="NOISEX-92 babble", kind="backgrounds",
    base_url="https://raw.githubusercontent.com/speechdnn/Noises/master/NoiseX-92",
    files=(RemoteFile("babble.wav", approx_gb=0.01, extract_subdir=None),),
    licence="no explicit licence (NOISEX-92 database, research use)",
    homepage="https://github.com/speechdnn/Noises",
    attribution="A. Varga and H. J. M. Steeneken, Assessment for automatic speech recognition II: "
                "NOISEX-92, Speech Communication 12(3), 1993",
    extract_factor=0.0,
    notes="A public mirror (the original Rice SPIB site is gone); override with AIP_MIRROR_NOISEX92 if it moves.")
