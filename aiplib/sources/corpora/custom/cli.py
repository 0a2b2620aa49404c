"""``python -m aiplib.sources.corpora.custom``: validate the custom inputs only, print every
problem."""

from __future__ import annotations

import argparse

from aiplib.core.tasks import KEYWORDS
from aiplib.sources.corpora.custom.validate import validate_inputs


def main(argv=None) -> int:
    """Command line: validate the custom inputs only, print every problem.

    ``python -m aiplib.sources.corpora.custom --speech-dir DIR --texts FILE --kws-dir DIR
    --kws-labels FILE --backgrounds-dir DIR [--keywords yes,no,…]``

    Returns
    -------
    int
        Exit status: 1 when any problem is fatal, else 0 (2 for a usage error, from argparse).
    """
    ap = argparse.ArgumentParser(
        prog="python -m aiplib.sources.corpora.custom",
        description="Validate the inputs of the custom profile (writes nothing).",
    )
    ap.add_argument("--speech-dir", default="", help="folder of utterances")
    ap.add_argument(
        "--texts", default="", help="CSV/TSV: file,text[,accent_group,speaker,licence,attribution]"
    )
    ap.add_argument("--kws-dir", default="", help="folder of keyword clips")
    ap.add_argument(
        "--kws-labels",
        default="",
        help="CSV/TSV: file,label[,speaker,accent_group,licence,attribution]",
    )
    ap.add_argument(
        "--backgrounds-dir", default="", help="folder of backgrounds (+ optional licences.csv)"
    )
    ap.add_argument(
        "--keywords", default=",".join(KEYWORDS), help="comma-separated closed keyword set"
    )
    a = ap.parse_args(argv)
    report = validate_inputs(
        speech_dir=a.speech_dir,
        texts=a.texts,
        kws_dir=a.kws_dir,
        kws_labels=a.kws_labels,
        backgrounds_dir=a.backgrounds_dir,
        keywords=a.keywords,
    )
    print(report.summary())
    print("FAILED: fix the fatal problems above" if not report.ok else "OK: the inputs can be used")
    return 0 if report.ok else 1
