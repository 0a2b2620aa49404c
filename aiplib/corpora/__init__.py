"""Stage 1–2 of each profile: gather raw inputs, build item banks, list the background battery.

One module per corpus family (lhotse-style ``gather`` / ``build`` split):

``aiplib.corpora.debian``
    check and install the Debian packages the embedded default is made of.
``aiplib.corpora.demo``
    the embedded default profile ``demo`` (Asterisk prompts, espeak-ng / flite voices, KWS
    words, 20 backgrounds from Debian packages).
``aiplib.corpora.paper``, ``aiplib.corpora.custom``
    the ``paper`` and ``custom`` profiles.

Submodules are imported on demand (``from aiplib.corpora import demo``) so that importing
``aiplib`` stays cheap.
"""
__all__: list[str] = []  # submodules are imported explicitly
