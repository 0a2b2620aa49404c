"""``python -m aiplib.sources.corpora.custom``: see
:func:`aiplib.sources.corpora.custom.cli.main`."""

import sys

from aiplib.sources.corpora.custom.cli import main

sys.exit(main())
