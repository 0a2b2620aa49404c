"""Every file format the pipeline writes: one reader and one writer each, with dtypes.

=========================================  ==============================  =============================
File (``ws`` = :class:`aiplib.core.workspace.Workspace`)  Reader                          Writer
=========================================  ==============================  =============================
``itembanks/<family>.jsonl`` (+ ``.json``)  :func:`read_item_bank`,         :func:`write_item_bank`
                                            :func:`read_item_bank_keywords`
``descriptors/battery.csv``                 :func:`read_battery_csv`        :func:`write_battery_csv`
``descriptors/acoustic_descriptors.csv``    :func:`read_descriptor_table`   :func:`write_descriptor_table`
``manifests/<family>.csv``                  :func:`read_manifest_csv`,      :func:`write_manifest_csv`
                                            :func:`read_manifest`
``inference/<model>/<task>.jsonl``          :func:`read_inference_jsonl`,   :func:`append_jsonl_lines` of
                                            :func:`read_results`            :func:`inference_row_json`
``results/scores/<task>.csv`` (+ ``.json``)  :func:`read_scores`,            :func:`write_scores`
                                            :func:`load_scores`
=========================================  ==============================  =============================

Conventions shared by every reader: ids and other text columns are read as strings exactly as
written (an item or background named ``NA`` stays ``"NA"``, ``"0001"`` stays ``"0001"``); CSVs are
written atomically (a ``.part`` file, then a rename) so a killed process never leaves half a
table; line-oriented files that grow during a run (inference JSONL) are appended and fsync'ed, and
their reader skips and counts an unreadable line instead of failing (issue 15, item 16).

Paths come from :class:`aiplib.core.workspace.Workspace`; this package knows only what is inside files. Its two
modules: :mod:`~aiplib.io.formats.tables` (item banks, battery, descriptors, manifests) and
:mod:`~aiplib.io.formats.results` (inference JSONL, scores); import from ``aiplib.io.formats``.
"""
from __future__ import annotations

from aiplib.io.formats import results, tables
from aiplib.io.formats.results import *  # noqa: F401,F403 - the names of results.__all__
from aiplib.io.formats.tables import *  # noqa: F401,F403 - the names of tables.__all__

__all__ = [*tables.__all__, *results.__all__]
