"""``python -m aiplib.corpora.custom``: see :func:`aiplib.corpora.custom.cli.main`."""
import sys

from .cli import main

sys.exit(main())
