"""What the ``demo`` profile's backgrounds are made of: Debian package files, their licences and
credits.

Read by :mod:`aiplib.sources.corpora.demo` (stage 1 copies :data:`BG_SOURCES` and :data:`NOTICES`;
its ``battery_specs`` turns :data:`BATTERY` into the background specs). Licences and credits are
those of the packages' Debian copyright and upstream README files; the lists are
``demo_sources.csv`` (``group, package, rel, licence, attribution``; group ``notice``: licence
notices copied next to the audio) and ``demo_battery.csv`` beside this module.
"""

from __future__ import annotations

import csv
from collections import namedtuple
from pathlib import Path

#: One file the demo copies from a Debian package (``rel``: path under /usr/share), with its licence
#: and credit.
Src = namedtuple("Src", "package rel licence attribution")


def _rows(name: str) -> list[dict]:
    """The rows of the CSV file ``name`` next to this module, as dicts."""
    with open(Path(__file__).with_name(name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


#: ``(group, Src)`` of every row of ``demo_sources.csv``.
_SOURCES = [(r.pop("group"), Src(**r)) for r in _rows("demo_sources.csv")]
#: Background source group → its files.
BG_SOURCES = {g: [s for g2, s in _SOURCES if g2 == g] for g, _ in _SOURCES if g != "notice"}
#: Licence notices copied next to the audio (licence text, per-file credits).
NOTICES = [s for g, s in _SOURCES if g == "notice"]
#: The demo battery: ``(bg_id, category, source group or synthetic kind, description, start_s)``.
BATTERY = [
    (r["bg_id"], r["category"], r["group"], r["description"], float(r["start_s"]))
    for r in _rows("demo_battery.csv")
]
