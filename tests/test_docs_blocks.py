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

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SMOKE_ALL_SCRIPT, block_env, repo_root_kept, run_block

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
MARK = re.compile(r"^\s*<!--\s*(runnable|not-run)\b:?(.*?)-->\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
README_MAX_LINES = 150


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


def _commands(script: str) -> list[str]:
    """The command lines of a script: comments (`` # …``) and blank lines dropped, spaces trimmed."""
    lines = (re.sub(r"(^|\s)#.*$", "", ln).strip() for ln in script.splitlines())
    return [ln for ln in lines if ln]


def runs_as_the_shared_make_all(block: Block) -> bool:
    """Whether ``block`` is the first runnable block (an empty data root before it) and runs exactly
    the commands of the session's smoke ``make all`` (conftest.SMOKE_ALL_SCRIPT): then it is checked
    against that run instead of running the same pipeline a second time."""
    return bool(RUNNABLE) and block is RUNNABLE[0] and block.lang != "console" and (
        _commands(block.code) == _commands(SMOKE_ALL_SCRIPT))


@pytest.fixture(scope="module")
def docs_env(request, tmp_path_factory):
    """The environment the blocks share (conftest.block_env): a smoke-size data root, the fake
    `my-asr`, and a `make` that does not redo `make setup`. When the first block is the shared smoke
    ``make all``, the data root starts as a copy (``cp -a``) of that run's, as the block left it. On
    exit the files the blocks wrote at the project root (a models file, a criteria file) are removed
    or restored."""
    tmp = tmp_path_factory.mktemp("docs-blocks")
    env = block_env(tmp, tmp / "data")
    if RUNNABLE and runs_as_the_shared_make_all(RUNNABLE[0]):
        shared = request.getfixturevalue("smoke_make_all")
        if shared.returncode == 0:
            subprocess.run(["cp", "-a", str(shared.data_root), env["DATA_ROOT"]], check=True)
    with repo_root_kept():
        yield env


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_runnable_block(block: Block, docs_env, request):
    script, expected = commands_and_output(block)
    if runs_as_the_shared_make_all(block):
        run = request.getfixturevalue("smoke_make_all")  # the same script, environment and empty data root
    else:
        run = run_block(script, docs_env)
    out = run.output
    assert run.returncode == 0, f"{block.where} exited {run.returncode}:\n{script}\n--- last output ---\n{out[-3000:]}"
    missing = [e for e in expected if e not in out]
    assert not missing, f"{block.where}: output lacks {missing}\n--- last output ---\n{out[-3000:]}"
