"""The README and docs/*.md: every shell block is marked and the runnable ones run; every link resolves.

A fenced ``bash`` / ``sh`` / ``shell`` / ``console`` block carries a mark on the line before its
fence: ``<!-- runnable -->`` (optionally followed by quoted strings its output must contain:
``<!-- runnable: "make all: done — report: " -->``) or ``<!-- not-run: reason -->`` (a GPU, the
internet, the user's own files, or ``make test`` itself). The runnable blocks run in document order
(README.md first, then docs/*.md by name) with the project as working folder, at smoke size
(``AIP_SMOKE=1``) in one temporary ``DATA_ROOT`` they share, with a fake ``my-asr`` recogniser on
``PATH``. In a ``console`` block the lines starting with ``$ `` are the commands and the other lines
are output the run must contain.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
MARK = re.compile(r"^\s*<!--\s*(runnable|not-run)\b:?(.*?)-->\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
README_MAX_LINES = 150
BLOCK_TIMEOUT_S = 1800

# The fake recogniser of the README's "audit your own model": prints one word for every WAV.
FAKE_ASR = '#!/bin/sh\ntest -f "$1" || { echo "my-asr: no file $1" >&2; exit 2; }\necho yes\n'


@dataclass
class Block:
    path: Path
    line: int                 # 1-based line of the opening fence
    lang: str
    code: str
    mark: str | None = None   # "runnable", "not-run" or None
    note: str = ""            # the mark's text after the colon
    expect: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the mark on the line before its fence (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        block = Block(path, start + 1, lang, "\n".join(body) + "\n")
        mark = MARK.match(lines[start - 1]) if start > 0 else None
        if mark:
            block.mark, block.note = mark.group(1), mark.group(2).strip()
            block.expect = re.findall(r'"([^"]+)"', block.note) if block.mark == "runnable" else []
        blocks.append(block)
    return blocks


def shell_blocks() -> list[Block]:
    return [b for p in DOCS for b in fenced_blocks(p) if b.lang in SHELLS]


def commands_and_output(block: Block) -> tuple[str, list[str]]:
    """The script a block runs and the output it must contain (a console block's non-``$`` lines)."""
    if block.lang != "console":
        return block.code, list(block.expect)
    cmds = [ln[2:] for ln in block.code.splitlines() if ln.startswith("$ ")]
    shown = [ln.strip() for ln in block.code.splitlines() if ln.strip() and not ln.startswith("$ ")]
    return "\n".join(cmds) + "\n", [*block.expect, *shown]


def test_readme_fits_on_a_page():
    n = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_every_shell_block_is_marked():
    blocks = shell_blocks()
    assert blocks, "no shell blocks found in README.md and docs/*.md"
    unmarked = [b.where for b in blocks if b.mark is None]
    assert not unmarked, ("shell blocks without <!-- runnable --> or <!-- not-run: reason --> on the line "
                          f"before the fence: {', '.join(unmarked)}")
    silent = [b.where for b in blocks if b.mark == "not-run" and not b.note]
    assert not silent, f"<!-- not-run --> blocks must say why: {', '.join(silent)}"


def test_make_test_block_is_what_ci_runs():
    """The README's `make test` block is not run here (it would run this test again); .ci/run runs it."""
    make_test = [b for b in shell_blocks() if re.search(r"^\s*make test\b", b.code, re.M)]
    assert make_test, "no block runs `make test`"
    assert all(b.mark == "not-run" for b in make_test), [b.where for b in make_test]
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.strip().startswith("#")]
    assert ci[-1] == "make test", f".ci/run ends with {ci[-1]!r}, not the README's `make test`"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for ln in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(ln):
            in_code = not in_code
        if in_code or not ln.startswith("#"):
            continue
        slug = _slug(ln.lstrip("#"))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def prose(path: Path) -> str:
    """The file without fenced blocks and inline code (links there are examples, not links)."""
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def test_links_resolve():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(prose(doc)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto: …
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{doc.relative_to(REPO)}: {target} (no heading #{anchor} in {dest.name})")
    assert not broken, "links that do not resolve:\n" + "\n".join(broken)


# ----- running the runnable blocks ------------------------------------------------------------------

RUNNABLE = [b for b in shell_blocks() if b.mark == "runnable"]


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory):
    """The environment the blocks share: a smoke-size data root, the fake `my-asr`, and a `make`
    that does not redo `make setup` (already done: `make test` depends on it). On exit the files
    the blocks wrote at the project root (a models file, a criteria file) are removed or restored."""
    real_make = shutil.which("make")
    if real_make is None or not (VENV / "bin" / "papermill").exists():
        pytest.skip("needs GNU make and the project's .venv (make setup)")
    tmp = tmp_path_factory.mktemp("docs-blocks")
    bin_dir, data_root = tmp / "bin", tmp / "data"
    bin_dir.mkdir()
    (bin_dir / "my-asr").write_text(FAKE_ASR)
    # -o: a checkout newer than .venv/.installed must not make the blocks reinstall the environment.
    (bin_dir / "make").write_text(f'#!/bin/sh\nexec "{real_make}" -o .venv/.installed "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIP_", "MAKE", "MFLAGS")) and k not in ("DATA_ROOT", "MODELS", "PROFILE")}
    env.update(AIP_SMOKE="1", DATA_ROOT=str(data_root), AIP_DATA_ROOT=str(data_root), PYTHONPATH=str(REPO),
               PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    before = {p.name: (p.read_bytes() if p.is_file() else None) for p in REPO.iterdir()}
    yield env
    for p in REPO.iterdir():
        if p.name not in before:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        elif before[p.name] is not None and p.is_file() and p.read_bytes() != before[p.name]:
            p.write_bytes(before[p.name])


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_runnable_block(block: Block, docs_env):
    script, expected = commands_and_output(block)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=docs_env,
                         capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"{block.where} exited {run.returncode}:\n{script}\n--- last output ---\n{out[-3000:]}"
    missing = [e for e in expected if e not in out]
    assert not missing, f"{block.where}: output lacks {missing}\n--- last output ---\n{out[-3000:]}"
