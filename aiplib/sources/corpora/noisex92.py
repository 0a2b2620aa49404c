"""NOISEX-92 [3]_: the babble recording (one of the 20 backgrounds).

The file is used as downloaded (``babble.wav``, no archive), so there is no reader.

.. [3] A. Varga and H. J. M. Steeneken, "Assessment for automatic speech recognition: II.
   NOISEX-92", Speech Communication 12(3), 1993. No explicit licence; the original Rice SPIB page is
   gone, so the default is a public GitHub mirror (github.com/speechdnn/Noises, ``NoiseX-92/``).
"""

from __future__ import annotations

from aiplib.sources.download import corpus_record

#: Download record of the NOISEX-92 babble file.
CORPUS = corpus_record("noisex92")
