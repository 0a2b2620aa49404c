"""Stage 7 over many GPUs or nodes: stable shards of the stimuli, and their merge.

A Slurm job array (``scripts/slurm/stage7.sbatch``) runs one process per shard; each decodes the
stimuli whose id hashes to its shard and appends to its own file
``inference/<model>/<task>.shard-<i>-of-<n>.jsonl``. :func:`merge_shards` (``make merge``, and
stage 8 before scoring) appends the shards' rows to ``inference/<model>/<task>.jsonl`` and moves
the shard files to ``inference/<model>/merged-shards/``.

The partition is a pure function of the stimulus id (SHA-256, so it is the same on every
machine, Python version and run); a shard that was killed resumes alone, from its own file.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .errors import AiplibError, AiplibParameterError

__all__ = ["ShardConflictError", "parse_shard", "shard_of", "select_shard", "shard_path", "shard_files",
           "merge_shards", "merge_all"]

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_FILE_RE = re.compile(r"^(?P<task>.+)\.shard-(?P<i>\d+)-of-(?P<n>\d+)\.jsonl$")


class ShardConflictError(AiplibError):
    """Two files hold different answers for the same stimulus, prompt and stimulus key."""


def parse_shard(spec: str | None = None, env=None) -> tuple[int, int] | None:
    """The shard this process runs, as ``(i, n)`` with ``0 <= i < n``, or None (no sharding).

    Parameters
    ----------
    spec : str, optional
        ``"i/n"`` (0-based ``i``), e.g. ``SHARD=0/4`` … ``SHARD=3/4``. Empty or None: read Slurm's
        job-array variables instead.
    env : mapping, optional
        Environment (default ``os.environ``): ``SLURM_ARRAY_TASK_ID``, ``SLURM_ARRAY_TASK_COUNT``
        and ``SLURM_ARRAY_TASK_MIN`` (an array ``--array=1-4`` has ids 1…4, min 1: shard = id − min).

    Raises
    ------
    AiplibParameterError
        If the spec is not ``i/n`` with ``0 <= i < n``.
    """
    env = os.environ if env is None else env
    if spec is not None and str(spec).strip():
        m = _SHARD_RE.match(str(spec))
        if not m:
            raise AiplibParameterError(f"shard must look like i/n (e.g. 0/4), got {spec!r}")
        i, n = int(m.group(1)), int(m.group(2))
    elif env.get("SLURM_ARRAY_TASK_ID") and env.get("SLURM_ARRAY_TASK_COUNT"):
        i = int(env["SLURM_ARRAY_TASK_ID"]) - int(env.get("SLURM_ARRAY_TASK_MIN") or 0)
        n = int(env["SLURM_ARRAY_TASK_COUNT"])
    else:
        return None
    if not 0 <= i < n:
        raise AiplibParameterError(f"shard {i}/{n}: the index must be in 0…{n - 1}")
    return (i, n)


def shard_of(stimulus_id: str, n: int) -> int:
    """Shard of one stimulus among ``n``: SHA-256 of its id (UTF-8), first 8 bytes, modulo ``n``."""
    digest = hashlib.sha256(str(stimulus_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % int(n)


def select_shard(manifest, shard: tuple[int, int] | None):
    """Rows of ``manifest`` (DataFrame with an ``id`` column) in shard ``(i, n)``; all if None."""
    if shard is None:
        return manifest
    i, n = shard
    return manifest[[shard_of(s, n) == i for s in manifest["id"]]]


def shard_path(result_file, shard: tuple[int, int] | None) -> Path:
    """``<task>.jsonl`` → ``<task>.shard-<i>-of-<n>.jsonl`` (unchanged when ``shard`` is None)."""
    p = Path(result_file)
    if shard is None:
        return p
    i, n = shard
    return p.with_name(f"{p.stem}.shard-{i}-of-{n}.jsonl")


def shard_files(model_dir) -> dict[str, list[Path]]:
    """Shard files waiting in one model's folder, per task (sorted by shard index)."""
    out: dict[str, list[Path]] = {}
    for p in sorted(Path(model_dir).glob("*.shard-*-of-*.jsonl")):
        m = _FILE_RE.match(p.name)
        if m:
            out.setdefault(m.group("task"), []).append(p)
    for task in out:
        out[task].sort(key=lambda p: int(_FILE_RE.match(p.name).group("i")))
    return out


def _key(row: dict) -> tuple:
    return (str(row.get("id")), row.get("prompt_id"), row.get("stim_key"))


def merge_shards(result_file, shards=None) -> dict:
    """Append the rows of a task's shard files to its result file, refusing contradictions.

    Parameters
    ----------
    result_file : str or Path
        ``inference/<model>/<task>.jsonl`` (created if missing).
    shards : list of Path, optional
        Default: every ``<task>.shard-*-of-*.jsonl`` beside it.

    Returns
    -------
    dict
        ``{"file", "shards", "rows_added", "duplicates_identical", "lines_skipped"}``.

    Raises
    ------
    ShardConflictError
        If two successful rows with the same ``(id, prompt_id, stim_key)`` give different ``raw``
        answers (in different files, or in a shard against the result file). Nothing is written.

    Notes
    -----
    Identical duplicates are written once. Error rows (``__ERROR__``) never conflict: a later
    successful row wins when results are read (:func:`aiplib.inference.read_results`). After the
    merge the shard files move to ``merged-shards/`` so a second merge adds nothing.
    """
    from .inference import _append_lines, _row_json, is_error_row, read_inference_jsonl, repair_jsonl  # noqa: PLC0415

    result_file = Path(result_file)
    if shards is None:
        m = result_file.stem
        shards = shard_files(result_file.parent).get(m, [])
    shards = [Path(s) for s in shards]
    seen: dict[tuple, tuple[str, Path]] = {}
    skipped = 0
    if result_file.is_file():
        repair_jsonl(result_file)
        rows, skipped = read_inference_jsonl(result_file)
        for r in rows:
            if not is_error_row(r):
                seen.setdefault(_key(r), (r.get("raw"), result_file))
    new_rows, identical = [], 0
    for s in shards:
        repair_jsonl(s)
        rows, n_bad = read_inference_jsonl(s)
        skipped += n_bad
        for r in rows:
            if is_error_row(r):
                new_rows.append(r)
                continue
            k = _key(r)
            if k in seen:
                raw, where = seen[k]
                if raw != r.get("raw"):
                    raise ShardConflictError(
                        f"stimulus {k[0]!r} (prompt {k[1]}) has two different answers: {raw!r} in "
                        f"{where} and {r.get('raw')!r} in {s}; remove the wrong shard file and re-run it")
                identical += 1
                continue
            seen[k] = (r.get("raw"), s)
            new_rows.append(r)
    result_file.parent.mkdir(parents=True, exist_ok=True)
    _append_lines(result_file, [_row_json(r) for r in new_rows])
    done_dir = result_file.parent / "merged-shards"
    for s in shards:
        done_dir.mkdir(exist_ok=True)
        s.replace(done_dir / s.name)
    return {"file": str(result_file), "shards": [str(s) for s in shards], "rows_added": len(new_rows),
            "duplicates_identical": identical, "lines_skipped": skipped}


def merge_all(inference_dir) -> list[dict]:
    """:func:`merge_shards` for every task of every model under ``inference_dir`` that has shards."""
    out = []
    for model_dir in sorted(p for p in Path(inference_dir).iterdir() if p.is_dir()):
        for task, files in shard_files(model_dir).items():
            out.append(merge_shards(model_dir / f"{task}.jsonl", files))
    return out


def main(argv=None) -> int:
    """``python -m aiplib.shards INFERENCE_DIR``: merge every shard file below it; exit 1 on a conflict."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m aiplib.shards", description=main.__doc__)
    ap.add_argument("inference_dir")
    a = ap.parse_args(argv)
    try:
        res = merge_all(a.inference_dir)
    except ShardConflictError as exc:
        print(f"merge refused: {exc}")
        return 1
    for r in res:
        print(f"merged {len(r['shards'])} shard(s) into {r['file']}: {r['rows_added']} rows added, "
              f"{r['duplicates_identical']} identical duplicates, {r['lines_skipped']} unreadable lines skipped")
    if not res:
        print(f"no shard files under {a.inference_dir}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
