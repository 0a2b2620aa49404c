"""JSON Lines files of records (item banks): atomic writing and strict reading.

Results files that grow while a stage runs (``inference/*.jsonl``) have their own tolerant,
append-only reader and writer in :mod:`aiplib.formats`.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_jsonl", "read_jsonl"]


def write_jsonl(path, rows) -> Path:
    """Write ``rows`` (dicts) one JSON object per line, atomically (``.part`` file, then rename).

    Parameters
    ----------
    path : str or Path
        Created with its folder; an existing file is replaced only once the new one is complete.
    rows : iterable of dict

    Returns
    -------
    Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def read_jsonl(path) -> list[dict]:
    """Read a JSON Lines file (blank lines skipped).

    Raises
    ------
    ValueError
        If a line is not valid JSON; the message names the file and the line number.
    """
    path = Path(path)
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
    return out
