"""Rendering the report, and the command line of the comparison and the criteria.

The report is notebook 09 (``notebooks/09_make_figures.py``), every table and figure in its own cell
under its caption. :func:`render_report` turns the *executed* notebook into ``results/report.html``
(one self-contained page) and ``results/report.md``; ``make`` calls it after stage 9 and ``make
report`` from the newer of the executed record and a JupyterLab-run
``notebooks/09_make_figures.ipynb`` (``python -m aiplib.analysis.report --render <executed 09>
<notebooks/09>``). ``--criteria criteria.json [--previous PATH]`` checks a run
(:func:`aiplib.analysis.criteria.check_criteria`, against a previous run with
:func:`aiplib.analysis.comparison.compare_runs`) and exits with :data:`EXIT_CRITERIA_FAILED` (3)
when anything fails.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import html
import logging
import re
import sys
from pathlib import Path

import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.analysis import report_tables as rt
from aiplib.analysis.criteria import check_criteria, load_criteria
from aiplib.analysis.provenance import read_provenance, shareable, write_sidecar
from aiplib.core.errors import AiplibError
from aiplib.core.workspace import PROFILES, workspace

log = logging.getLogger(__name__)

#: Exit status of ``python -m aiplib.analysis.report`` when a criterion fails or a condition got
#: worse than in the previous run.
EXIT_CRITERIA_FAILED = 3

# ------------------------------------------------------------------------------------ render
#: Cells of notebook 09 with this tag are left out of the report (with the parameter cells).
REPORT_HIDE_TAG = "report-hide"

#: Cell tags whose cells the report leaves out.
_SKIP_TAGS = {"parameters", "injected-parameters", REPORT_HIDE_TAG}

#: The report's own style: contents box, text outputs, scrolling tables, coloured verdicts.
_CSS = """<style>
body,nav.aip-toc,.jp-RenderedText pre{font-family:var(--jp-content-font-family)}
nav.aip-toc{border:1px solid #ddd;background:#fafafa;padding:.4em 1.2em;margin:1em 0;
font-size:14px}
nav.aip-toc ul{margin:.2em 0;padding-left:1.2em} nav.aip-toc li.h3{margin-left:1.2em;font-size:13px}
.jp-RenderedText pre{font-size:14px;white-space:pre-wrap}
div.aip-scroll{overflow-x:auto;max-width:100%}
div.aip-scroll::-webkit-scrollbar{height:10px;background:#eee}
div.aip-scroll::-webkit-scrollbar-thumb{background:#999;border-radius:5px}
p.aip-wide{font-size:12px;color:#555;margin:.2em 0}
table.tbl{border-collapse:collapse;font-size:12px} table.tbl td,table.tbl th{text-align:left;
vertical-align:top;padding:3px 7px} td.num{white-space:nowrap}
td.worse{color:#b00020;font-weight:600} td.better{color:#1b7d2c;font-weight:600} td.same{color:#666}
main{max-width:1250px;margin:auto}
</style>"""

#: A table wider than its box says so above it (the box scrolls sideways; some browsers hide the
#: bar).
_WIDE_JS = """<script>
addEventListener("load", () => document.querySelectorAll("div.aip-scroll").forEach(d => {
  const th = d.querySelectorAll("thead th"), box = d.getBoundingClientRect();
  const hidden = Array.from(th).filter(h => h.getBoundingClientRect().right > box.right + 1).length;
  if (d.scrollWidth <= d.clientWidth + 1 || !hidden) return;
  const p = document.createElement("p");
  p.className = "aip-wide";
  p.textContent = `\u2194 ${hidden} of ${th.length} columns are to the right: ` +
    "scroll the table sideways";
  d.before(p);
}));
</script>"""

#: An absolute path in printed text (made shareable in the report).
_ABS_PATH = re.compile(r"(?<![\w.~/-])/[^\s'\"`<>]+")


def _kept_outputs(outputs, *, body: bool, data_root: Path) -> list:
    """A code cell's outputs as the report keeps them: stdout only from the body on, the pieces of
    one print joined, local paths made shareable, blank text dropped."""
    outs = []
    for o in outputs:
        if o.get("output_type") != "stream":
            outs.append(o)
            continue
        if not body or o.get("name") != "stdout":
            continue
        if outs and outs[-1].get("output_type") == "stream":  # one print may arrive in pieces
            outs[-1]["text"] += "".join(o["text"])
            continue
        o["text"] = "".join(o["text"])
        outs.append(o)
    kept = []
    for o in outs:
        if o.get("output_type") == "stream":
            o["text"] = _ABS_PATH.sub(lambda m: shareable(m.group(0), data_root), o["text"])
            if not o["text"].strip():
                continue
        kept.append(o)
    return kept


def _report_cells(nb, data_root: Path) -> list:
    """The cells that go into the report: no parameter or hidden cells, no code cell left without
    output. Printed text (stdout) is kept from the first ``## `` section on, one block per cell run
    of it (the pieces a kernel sends of one print are joined; blank text is dropped), its local
    paths as :func:`aiplib.analysis.provenance.shareable` writes them; stderr and the set-up cells'
    printed text are the log."""
    cells = []
    body = False
    for c in nb.cells:
        if _SKIP_TAGS & set(c.get("metadata", {}).get("tags", [])):
            continue
        if c.cell_type == "markdown" and re.search(r"^## ", c.source, re.M):
            body = True
        if c.cell_type == "code":
            c.outputs = _kept_outputs(c.get("outputs", []), body=body, data_root=data_root)
            if not c.outputs:
                continue
        cells.append(c)
    return cells


def _nowrap_numbers(body: str) -> str:
    """Mark the cells of the report's tables that hold a number (a digit, at most 40 characters)
    with the class ``num`` and put every table in a box that scrolls sideways."""

    def cell(m):
        attrs, inner = m.group(1) or "", m.group(2)
        text = html.unescape(re.sub(r"<[^>]+>", "", inner)).strip()
        if not re.search(r"\d", text) or len(text) > 40:
            return m.group(0)
        attrs = (
            attrs.replace('class="', 'class="num ', 1)
            if 'class="' in attrs
            else attrs + ' class="num"'
        )
        return f"<td{attrs}>{inner}</td>"

    body = re.sub(r"<td(\s[^>]*)?>(.*?)</td>", cell, body, flags=re.S)
    return re.sub(
        r'(<table[^>]*class="[^"]*\btbl\b[^"]*"[^>]*>.*?</table>)',
        r'<div class="aip-scroll">\1</div>',
        body,
        flags=re.S,
    )


def _output_markdown(o, results: Path, stem: str) -> str:
    kind = o.get("output_type")
    if kind == "stream":
        return "```\n" + "".join(o.get("text", "")).rstrip() + "\n```"
    if kind == "error":
        return "```\n" + f"{o.get('ename')}: {o.get('evalue')}" + "\n```"
    data, meta = o.get("data", {}), o.get("metadata", {})
    if "text/markdown" in data:
        return "".join(data["text/markdown"]).strip()
    if "image/png" in data:
        rel = meta.get("aip_file")
        if not rel:  # an image without a file: write one
            rel = f"report_files/{stem}.png"
            (results / "report_files").mkdir(exist_ok=True)
            (results / rel).write_bytes(base64.b64decode("".join(data["image/png"])))
        return f"![{Path(rel).stem}]({rel})"
    if "text/html" in data:
        return "".join(data["text/html"]).strip()
    if "text/plain" in data:
        return "```\n" + "".join(data["text/plain"]).rstrip() + "\n```"
    return ""


def _slug(text: str) -> str:
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


#: The nbconvert template of ``report.html`` (a folder shipped with the package: lab's template
#: without remote scripts, with the report's head, table of contents, figure alt texts and tables).
REPORT_TEMPLATE = Path(__file__).with_name("report_template")


def _title(cells) -> str:
    """The first ``# `` heading of the markdown cells (``AIP-Speech report`` when none)."""
    for c in cells:
        if c.cell_type != "markdown":
            continue
        m = re.search(r"^# (.+)$", c.source, re.M)
        if m:
            return m.group(1).strip()
    return "AIP-Speech report"


#: Models named in the report's title before the rest are counted (``… +N more``).
TITLE_MAX_MODELS = 6


def _run_models(results: Path) -> list[str]:
    """The models that produced rows: ``tables/coverage.csv`` (stage 8), else the condition
    tables; sorted."""
    cov = results / "tables" / "coverage.csv"
    if cov.is_file():
        t = pd.read_csv(cov)
        if "n_scored" in t:
            t = t[t["n_scored"] > 0]
        return sorted(set(t["model"].astype(str)))
    models = set()
    for p in sorted((results / "tables").glob("conditions_*.csv")):
        models |= set(pd.read_csv(p, usecols=["model"])["model"].astype(str))
    return sorted(models)


def run_title(results, executed_nb) -> str:
    """The report's title (its first heading and the browser tab): ``Results · <profile> profile ·
    <models> · <date>``; the profile from ``provenance.json`` (else the workspace folder's name),
    the models that produced rows (:func:`_run_models`, at most :data:`TITLE_MAX_MODELS` named),
    the date (UTC) the notebook was executed (its modification time)."""
    results = Path(results)
    profile = results.parent.name
    if (results / "provenance.json").is_file():
        profile = read_provenance(results).get("profile") or profile
    models = _run_models(results)
    named = ", ".join(models[:TITLE_MAX_MODELS]) or "no model scored"
    if len(models) > TITLE_MAX_MODELS:
        named += f" +{len(models) - TITLE_MAX_MODELS} more"
    stamp = dt.datetime.fromtimestamp(Path(executed_nb).stat().st_mtime, dt.timezone.utc)
    return f"Results · {profile} profile · {named} · {stamp.date().isoformat()}"


def _retitle(cells, title: str) -> None:
    """Put ``title`` in place of the first ``# `` heading of the markdown cells (or above them)."""
    for c in cells:
        if c.cell_type == "markdown" and re.search(r"^# .+$", c.source, re.M):
            c.source = re.sub(r"^# .+$", lambda _m: f"# {title}", c.source, count=1, flags=re.M)
            return
    import nbformat

    cells.insert(0, nbformat.v4.new_markdown_cell(f"# {title}"))


def _link_glossary(cells) -> None:
    """Link the first use of every glossary term (:data:`aiplib.analysis.report_tables.GLOSSARY`)
    in the markdown cells and Markdown-only outputs, in reading order, to its entry; the glossary
    section's own text (the cell holding its anchors) is left alone."""
    pending = rt.glossary_patterns()
    for c in cells:
        if c.cell_type == "markdown":
            c.source = rt.link_first_uses(c.source, pending)
            continue
        for o in c.get("outputs", []):
            data = o.get("data", {})
            if "text/markdown" not in data or "text/html" in data:
                continue
            text = "".join(data["text/markdown"])
            if 'id="glossary-' in text:
                continue
            data["text/markdown"] = rt.link_first_uses(text, pending)


def _files_cell(results: Path):
    """The last section: every CSV and PDF of ``results`` (relative paths), and the list."""
    import nbformat

    files = sorted(
        p.relative_to(results).as_posix()
        for p in results.rglob("*")
        if p.is_file() and p.suffix in (".csv", ".pdf")
    )
    listing = "\n".join(f"- [{f}]({f})" for f in files) or "_(none)_"
    cell = nbformat.v4.new_markdown_cell(
        "## Files\n\nEvery table (CSV) and figure (PDF) of this run, relative to `results/` "
        "(each has a JSON provenance sidecar of the same name):\n\n" + listing
    )
    return cell, files


def _headings(cells) -> list[tuple[int, str, str]]:
    """``(level, anchor, title)`` of the h2/h3 headings of the markdown cells, in order, with the
    anchors nbconvert gives them (its ``markdown2html`` filter)."""
    from xml.etree import ElementTree

    from nbconvert.filters import markdown2html

    toc = []
    for c in cells:
        if c.cell_type != "markdown":
            continue
        for line in c.source.splitlines():
            m = re.match(r"(#{2,3}) (.+)$", line)
            if not m:
                continue
            h = ElementTree.fromstring(markdown2html(line))
            title = "".join(h.itertext()).removesuffix("¶").strip()
            toc.append((len(m.group(1)), h.get("id"), html.escape(title, quote=False)))
    return toc


def _toc_html(toc) -> str:
    """The table of contents as a ``nav`` (HTML)."""
    items = "".join(f'<li class="h{lvl}"><a href="#{a}">{t}</a></li>' for lvl, a, t in toc)
    return f'<nav class="aip-toc"><strong>Contents</strong><ul>{items}</ul></nav>'


def _figure_stem(path) -> str:
    """A figure's alt text: the stem of its file name."""
    return Path(path).stem


def _export_html(nb, toc) -> str:
    """``report.html``'s text: the notebook through :data:`REPORT_TEMPLATE`, code hidden."""
    from nbconvert import HTMLExporter

    quiet = logging.getLogger("aiplib.analysis.report.nbconvert")
    quiet.setLevel(logging.ERROR)
    exporter = HTMLExporter(
        template_name=REPORT_TEMPLATE.name,
        extra_template_basedirs=[str(REPORT_TEMPLATE.parent)],
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        log=quiet,
    )
    exporter.register_filter("aip_tables", _nowrap_numbers)
    exporter.register_filter("aip_stem", _figure_stem)
    resources = {"aip_head": _CSS + _WIDE_JS, "aip_toc": _toc_html(toc)}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def _markdown(nb, toc, results: Path) -> str:
    """``report.md``'s text: markdown cells as written (the contents after the first), outputs as
    :func:`_output_markdown` writes them."""
    parts = []
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown":
            parts.append(c.source.strip())
            if i == 0 and toc:
                lines = []
                for lvl, _anchor, t in toc:
                    indent = "  " if lvl == 3 else ""
                    lines.append(f"{indent}- [{t}](#{_slug(t)})")
                parts.append("\n".join(lines))
        elif c.cell_type == "code":
            for k, o in enumerate(c.outputs):
                text = _output_markdown(o, results, f"cell{i}_{k}")
                if text:
                    parts.append(text)
    return "\n\n".join(parts) + "\n"


def _n_figures(nb) -> int:
    """How many ``image/png`` outputs the notebook holds (each embedded in the page)."""
    n = 0
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            if "image/png" in o.get("data", {}):
                n += 1
    return n


def _read_executed(executed_nb: Path):
    """The executed notebook; raises :class:`AiplibError` if missing or without outputs."""
    import nbformat

    if not executed_nb.is_file():
        raise AiplibError(f"{executed_nb} does not exist: run stage 9 first (make 09)")
    nb = nbformat.read(executed_nb, as_version=4)
    if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
        raise AiplibError(f"{executed_nb} has no outputs: render the executed copy of notebook 09")
    return nb


def render_report(executed_nb, results_dir) -> dict:
    """Render ``report.html`` and ``report.md`` into ``results_dir`` (linking its files relatively)
    from ``executed_nb``, notebook 09 executed by papermill
    (``data/<profile>/executed/09_make_figures.ipynb``).

    Returns ``report_html, report_md`` (paths), ``toc`` (``(level, anchor, title)`` of the h2/h3
    headings, in order), ``figures`` (images embedded), ``files`` (the CSV/PDF paths linked),
    ``sidecar`` (``report.json``, or None without ``provenance.json``).

    Raises
    ------
    AiplibError
        If the notebook does not exist or holds no executed output (run stage 9 first).

    HTML: nbconvert's ``HTMLExporter`` with the template :data:`REPORT_TEMPLATE` (lab's, code
    hidden, no remote scripts), every ``image/png`` a ``data:`` URI with its file name as alt text;
    the first heading and the page's title :func:`run_title` (profile, models, date); the first use
    of each glossary term linked to its entry (:func:`_link_glossary`); a table of contents after
    the first cell and a last section linking every CSV/PDF; printed
    notes as :func:`_report_cells` keeps them; table cells that hold a number do not wrap and every
    table scrolls sideways in its own box. Markdown: markdown cells as written, outputs as
    ``text/markdown`` (:class:`aiplib.analysis.report_tables.Table`), figures linked by their
    output metadata ``aip_file``.
    """
    executed_nb = Path(executed_nb)
    results = Path(results_dir)
    nb = _read_executed(executed_nb)
    nb.cells = _report_cells(nb, results.parent.parent)
    results.mkdir(parents=True, exist_ok=True)
    files_cell, files = _files_cell(results)
    nb.cells.append(files_cell)
    _retitle(nb.cells, run_title(results, executed_nb))
    _link_glossary(nb.cells)
    nb.metadata["title"] = _title(nb.cells)
    toc = _headings(nb.cells)
    if nb.cells:
        nb.cells[0].metadata["aip_toc_after"] = True
    html_path = results / "report.html"
    html_path.write_text(_export_html(nb, toc), encoding="utf-8")
    md_path = results / "report.md"
    md_path.write_text(_markdown(nb, toc, results), encoding="utf-8")
    sidecar = None
    if (results / "provenance.json").is_file():
        sidecar = write_sidecar(md_path, root=results, provenance=read_provenance(results))
    return {
        "report_html": html_path,
        "report_md": md_path,
        "toc": toc,
        "figures": _n_figures(nb),
        "files": files,
        "sidecar": sidecar,
    }


def newest_executed(paths) -> Path:
    """The most recently modified of the notebooks ``paths`` that holds executed output (the record
    of ``make 09`` or ``notebooks/09_make_figures.ipynb`` run and saved in JupyterLab).

    Raises
    ------
    AiplibError
        If none of them exists with outputs.
    """
    import nbformat

    found = [
        p
        for p in map(Path, paths)
        if p.is_file()
        and any(
            c.get("outputs") for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code"
        )
    ]
    if not found:
        raise AiplibError(
            f"none of {', '.join(map(str, paths))} holds executed output: "
            "run stage 9 first (make 09)"
        )
    return max(found, key=lambda p: p.stat().st_mtime_ns)


# ------------------------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    """The command line of :func:`main`."""
    ap = argparse.ArgumentParser(
        prog="python -m aiplib.analysis.report",
        description="Render results/report.html and "
        ".md from the executed notebook 09 (--render), or check criteria (exit status 3 on "
        "failure).",
    )
    ap.add_argument("--profile", default="demo", choices=PROFILES)
    ap.add_argument(
        "--data-root",
        default=None,
        help="parent of the profile folders (default $AIP_DATA_ROOT, else <repo>/data)",
    )
    ap.add_argument(
        "--render",
        default=None,
        metavar="NOTEBOOK",
        nargs="+",
        help="executed notebook 09 to render into the profile's results/ (of several, the "
        "newest that holds outputs)",
    )
    ap.add_argument("--criteria", default=None, help="criteria JSON file")
    ap.add_argument(
        "--previous",
        default=None,
        help="previous run: workspace root or results folder with provenance.json",
    )
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument(
        "--min-diff",
        type=float,
        default=None,
        help="minimum change in pp for a worse/better verdict (default: the "
        "criteria file's min_diff_pp, else 2)",
    )
    ap.add_argument(
        "--check-only",
        action="store_true",
        help="do not recompute the condition tables; check the existing ones",
    )
    return ap


def _criteria_spec(args) -> tuple[dict | None, float]:
    """The criteria to check (None: none given) and the minimum change in pp (the command line's,
    else the criteria file's, else the default)."""
    spec = None
    if args.criteria:
        spec = load_criteria(args.criteria)
    if args.min_diff is not None:
        min_diff = args.min_diff
    elif spec:
        min_diff = spec["min_diff_pp"]
    else:
        min_diff = cond.DEFAULT_MIN_DIFF_PP
    if spec is not None:
        previous = None
        if spec["previous"]:
            previous = str(spec["previous"])
        spec = {
            **{k: v for k, v in spec.items() if k not in ("source",)},
            "previous": previous,
            "min_diff_pp": min_diff,
        }
    elif args.previous:
        spec = {"criteria": [], "min_diff_pp": min_diff}
    return spec, min_diff


def _render(args, ws) -> int:
    """``--render``: write the report from the newest executed notebook given."""
    nb = newest_executed(args.render)
    out = render_report(nb, ws.results)
    print(
        f"report: {out['report_html']} ({out['figures']} figures embedded, "
        f"{len(out['toc'])} sections) and {out['report_md']}, from {nb}"
    )
    return 0


def _check(args, ws) -> list:
    """Recompute the condition tables (unless ``--check-only``) and check the criteria; the
    failures."""
    spec, min_diff = _criteria_spec(args)
    kw = dict(n_resamples=args.n_resamples, seed=args.seed, level=args.level)
    if not args.check_only:
        written = cond.write_condition_tables(ws, min_diff_pp=min_diff, **kw)
        print("condition tables: " + ", ".join(str(p) for p in written.values()))
    return check_criteria(ws, spec, args.previous, **kw)


def _print_failures(failures) -> None:
    """The first 50 failures on stderr."""
    print(f"criteria FAILED ({len(failures)}):", file=sys.stderr)
    for f in failures[:50]:
        print(f"  - {f['message']}", file=sys.stderr)
    if len(failures) > 50:
        print(f"  … and {len(failures) - 50} more", file=sys.stderr)


def main(argv=None) -> int:
    """``python -m aiplib.analysis.report``: render the report, or check criteria / regressions.

    ``--render NOTEBOOK [NOTEBOOK ...]`` writes ``results/report.html`` and ``.md`` from the newest
    of these that holds outputs (:func:`newest_executed`, :func:`render_report`). Otherwise the
    condition tables are recomputed and written (unless ``--check-only``) and the criteria checked.

    Exit status: 0 pass; :data:`EXIT_CRITERIA_FAILED` (3) when a criterion fails or a condition
    got worse than the previous run; 1 on an aiplib error (missing scores or notebook, invalid
    criteria file, runs that cannot be compared); 2 on bad arguments.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        ws = workspace(args.profile, data_root=args.data_root)
        if args.render:
            return _render(args, ws)
        failures = _check(args, ws)
    except AiplibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if failures:
        _print_failures(failures)
        return EXIT_CRITERIA_FAILED
    if args.criteria or args.previous:
        print("criteria passed")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
