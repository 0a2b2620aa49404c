"""Every file format the pipeline writes: one reader and one writer each, with dtypes.

=========================================  ==============================
============================= File (``ws`` = :class:`aiplib.core.workspace.Workspace`)  Reader
Writer =========================================  ==============================
============================= ``itembanks/<family>.jsonl`` (+ ``.json``)  :func:`read_item_bank`,
:func:`write_item_bank`
                                            :func:`read_item_bank_keywords`
``descriptors/battery.csv``                 :func:`read_battery_csv`
:func:`write_battery_csv` ``descriptors/acoustic_descriptors.csv``    :func:`read_descriptor_table`
:func:`write_descriptor_table` ``manifests/<family>.csv``
:func:`read_manifest_csv`,      :func:`write_manifest_csv`
                                            :func:`read_manifest`
``inference/<model>/<task>.jsonl``          :func:`read_inference_jsonl`,
:func:`append_jsonl_lines` of
                                            :func:`read_results`
                                              :func:`inference_row_json`
``results/scores/<task>.csv`` (+ ``.json``)  :func:`read_scores`,            :func:`write_scores`
                                            :func:`load_scores`
=========================================  ==============================
=============================

Ids and other text columns are read as strings exactly as written (``NA`` stays ``"NA"``, ``"0001"``
stays ``"0001"``); CSVs are written atomically (a ``.part`` file, then a rename); inference JSONL is
appended and fsync'ed, and its reader skips and counts an unreadable line. Paths come from
:class:`aiplib.core.workspace.Workspace`.
"""

from __future__ import annotations

from aiplib.io.formats import results, tables
from aiplib.io.formats.results import *  # noqa: F401,F403 - the names of results.__all__
from aiplib.io.formats.tables import *  # noqa: F401,F403 - the names of tables.__all__

__all__ = [*tables.__all__, *results.__all__]
