"""Notebook 10 in a real browser: JupyterLab + headless Chromium (Debian's), driven by Playwright.

The test starts JupyterLab on 127.0.0.1 with a token, in a scratch folder holding a copy of the
repository's ``notebooks/10_listen_and_explore.ipynb`` and a synthetic workspace with made-up
inference rows whose responses name their stimulus (``word 0 at 5 with foxtrot`` is item a00,
background bg05, 5 dB). It opens the notebook, runs all cells from the Run menu, changes the
background and the SNR in the widget, and checks that the mixture's ``<audio>`` source changes, that
the bytes it plays are ``wav_bytes(materialize(row))`` of the chosen row, that Chromium decodes them
(duration of the item), and that the displayed response is the one for that stimulus. One stimulus
(a00, bg06, 5 dB) answers with a loop of 88 words: clicking its worst case by the label "bg06 @ 5 dB"
shows the response cut after 40 words and the metrics block within one screen height (900 px) below
the players; the "… +N words" toggle opens the rest. Another click, on "bg03 @ 0 dB", loads that
stimulus. Last, the condition-family selector switches to the ``channel`` family (manifests,
inference rows and scores made here for three cheap transforms): the SNR chooser disappears and the
mixture player holds ``wav_bytes(materialize(row))`` of the item's ``telephone`` row. The server's root is laid out as the project (``jupytext.toml``, ``notebooks/`` with the
pair): the notebook is served by jupytext's contents manager and shows as unmodified once the
kernel is up. A second test opens a copy of ``report.html`` (rendered from notebook 09 executed
by papermill on a small synthetic run) from another folder, without JupyterLab: every image is
decoded, nothing but the page and ``data:`` URIs is requested, every TOC link reaches its section.
A third opens the report at 1280 px: Findings first with every link resolving, no table cell holding
a number wraps, wide tables scroll inside their box, Figure 5 has no error bar without an interval.
Screenshots go to ``build/browser/`` for a person to look at. No browser is downloaded: Playwright launches /usr/bin/chromium
(``make setup`` installs it from binder/apt.txt).
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from test_widgets import CHANNEL, make_explorer_workspace, write_family_inference

from aiplib.core.textnorm import normalize_text
from aiplib.explore import data as xd
from aiplib.explore.ui import CAP_WORDS
from aiplib.scoring.score import score_inference

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = "10_listen_and_explore.ipynb"
PAIR = "10_listen_and_explore.py"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 60
CELLS_DONE_MS = 90_000
CHANGE_MS = 30_000
VIEWPORT = {"width": 1400, "height": 900}
SHOTS = ROOT / "build" / "browser"
LOOP = "I'm going to go to the left and " + "left and " * 40  # 88 words

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium "
                       "(make setup installs it from binder/apt.txt: apt-get install chromium)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status


def _start_lab(tmp_path: Path, data_root: Path):
    """Start JupyterLab in its own process group; return (process, base URL, token, log path)."""
    root = tmp_path / "lab"          # laid out as the project: jupytext.toml + notebooks/ pairs
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "jupytext.toml", root / "jupytext.toml")
    for name in (NOTEBOOK, PAIR):
        shutil.copy(ROOT / "notebooks" / name, root / "notebooks" / name)
    jdir = tmp_path / "jupyter"
    settings = jdir / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no news or update checks (the machine has no network); no pop-ups over the notebook
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"checkForUpdates": False, "fetchNews": "false"}))
    port, token = _free_port(), uuid.uuid4().hex
    env = dict(os.environ, AIP_DATA_ROOT=str(data_root), AIP_PROFILE="demo", AIP_SMOKE="1",
               JUPYTERLAB_SETTINGS_DIR=str(jdir / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(jdir / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(jdir / "runtime"), JUPYTER_CONFIG_DIR=str(jdir / "config"),
               MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    log = tmp_path / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.extension_manager=readonly", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=root,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if _get(f"{base}/api/status?token={token}") == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            _stop_lab(proc, base, token)
            raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    return proc, base, token, log


def _stop_lab(proc, base: str, token: str) -> None:
    """Ask the server to shut down (it stops its kernels), then end its process group if needed."""
    if proc.poll() is None:
        try:
            req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST", data=b"")
            urllib.request.urlopen(req, timeout=5).close()
        except OSError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)  # the group this test started (start_new_session), kernels included
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue


def _mixture_bytes(page) -> tuple[str, bytes, float]:
    """(src, bytes behind the blob URL, duration in s once Chromium has read the header)."""
    out = page.evaluate("""async () => {
        const el = document.querySelector('audio.aip-mixture-audio');
        const buf = new Uint8Array(await (await fetch(el.src)).arrayBuffer());
        let s = ''; for (let i = 0; i < buf.length; i += 8192) s += String.fromCharCode(...buf.subarray(i, i + 8192));
        if (el.readyState < 1) {
            el.load();
            await new Promise(r => { el.addEventListener('loadedmetadata', r, {once: true});
                                     el.addEventListener('error', r, {once: true}); setTimeout(r, 10000); });
        }
        return [el.src, btoa(s), el.duration, el.error ? el.error.message || String(el.error.code) : null];
    }""")
    src, b64, duration, err = out
    assert err is None, f"Chromium could not decode the mixture: {err}"
    return src, base64.b64decode(b64), duration


def _assert_opened_unmodified(page, base: str, token: str) -> None:
    """The notebook is served by jupytext's contents manager and is not modified by opening it.

    Only the jupytext contents manager opens a percent script as a notebook; the kernel is up,
    so JupyterLab has already written its kernelspec and ``language_info`` into the model: the
    tab is clean when the committed metadata matches them (issue 16; tests/test_lab_and_filter.py).
    """
    from ipykernel.ipkernel import IPythonKernel

    with urllib.request.urlopen(f"{base}/api/contents/notebooks/{PAIR}?type=notebook&token={token}",
                                timeout=10) as r:
        model = json.load(r)
    assert model["type"] == "notebook" and model["content"]["cells"][0]["cell_type"] == "markdown"
    page.wait_for_timeout(1000)   # metadata from the kernel's info reply lands after "Idle"
    committed = json.loads((ROOT / "notebooks" / NOTEBOOK).read_text())["metadata"]["language_info"]
    if committed["version"] != IPythonKernel.language_info["version"]:
        print(f"Python {IPythonKernel.language_info['version']} is not the notebooks' "
              f"{committed['version']}: JupyterLab rewrites language_info on open here")
        return
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=NOTEBOOK).first
    assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "the notebook shows as modified on open"


def _make_loop(ws, sid: str = "a00_bg06_snr5") -> None:
    """Replace one response of the fake ASR model with a looping transcript."""
    path = ws.inference / "fake_asr" / "asr.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        if r["id"] == sid:
            r["raw"] = LOOP
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_notebook10_explorer_in_headless_chromium(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    t0 = time.monotonic()
    data_root = tmp_path / "data"
    ws = make_explorer_workspace(data_root)
    _make_loop(ws)
    score_inference(ws)  # results/scores/asr.csv: the worst-case list and the ranked table are filled
    from aiplib.stimuli.family_manifests import build_family_manifest

    ch = ws.with_family("channel")
    build_family_manifest(ws, "channel", "asr", conditions=CHANNEL)
    write_family_inference(ch, "asr")
    score_inference(ch)
    expected = {(bg, snr): xd.wav_bytes(xd.stimulus_audio(ws, "asr", "a00", bg, snr)["mixture"])
                for bg, snr in (("bg00", 10), ("bg05", 10), ("bg05", 0))}
    expected[("a01", "bg03", 0)] = xd.wav_bytes(xd.stimulus_audio(ws, "asr", "a01", "bg03", 0)["mixture"])
    expected[("a01", "telephone")] = xd.wav_bytes(xd.stimulus_audio(ch, "asr", "a01", "telephone")["mixture"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    proc, base, token, log = _start_lab(tmp_path, data_root)
    shots = []
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
                args=CHROMIUM_FLAGS, viewport=VIEWPORT)
            try:
                page = ctx.new_page()
                page.set_default_timeout(CHANGE_MS)
                page.goto(f"{base}/lab/tree/notebooks/{NOTEBOOK}?token={token}", wait_until="domcontentloaded",
                          timeout=60_000)
                page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
                # wait until the kernel is up (status bar "… | Idle"): a Run All sent while it starts is lost
                page.get_by_text(re.compile(r"^Python 3.*\| Idle$")).first.wait_for(timeout=60_000)
                _assert_opened_unmodified(page, base, token)
                # Run > Run All Cells
                page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
                page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

                response = page.locator(".aip-response .aip-response-text")
                expect(response).to_have_text("word 0 at 10 with alpha", timeout=CELLS_DONE_MS)
                src0, wav0, dur0 = _mixture_bytes(page)
                assert src0.startswith("blob:")
                assert wav0 == expected[("bg00", 10)]
                assert dur0 == pytest.approx(1.0, abs=0.01)  # item a00 lasts 1 s

                page.select_option(".aip-bg select", label="bg05")
                expect(response).to_have_text("word 0 at 10 with foxtrot")
                expect(page.locator(".aip-mixinfo")).to_contain_text("a00_bg05_snr10")
                src1, wav1, dur1 = _mixture_bytes(page)
                assert src1 != src0 and wav1 == expected[("bg05", 10)] != wav0
                assert dur1 == pytest.approx(1.0, abs=0.01)

                page.select_option(".aip-snr select", label="0 dB")
                expect(response).to_have_text("word 0 at 0 with foxtrot")
                src2, wav2, _ = _mixture_bytes(page)
                assert src2 not in (src0, src1) and wav2 == expected[("bg05", 0)] != wav1
                expect(page.locator(".aip-bg-info")).to_contain_text("bg05")
                expect(page.locator(".aip-metrics")).to_contain_text("+200.0 pp")  # ΔWER vs clean, in pp as the report
                # the diff's CSS is applied (the HTML widget keeps the <style>): an inserted word is green
                ins = page.locator(".aip-response .aip-response-text .aip-ins").first
                assert ins.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(200, 230, 201)"

                # the looping worst case, clicked by its background/SNR label
                page.locator(".aip-worst-case", has_text="bg06 @ 5 dB").click()
                expect(page.locator(".aip-mixinfo")).to_contain_text("a00_bg06_snr5")
                words = normalize_text(LOOP).split()  # the response as scored
                expect(response).to_have_text(" ".join(words[:CAP_WORDS]))
                more = page.locator(".aip-response details.aip-more summary").first
                expect(more).to_have_text(f"… +{len(words) - CAP_WORDS} words")
                expect(page.locator(".aip-metrics")).to_contain_text("looping response")
                players = page.locator(".aip-players").bounding_box()
                metrics = page.locator(".aip-metrics").bounding_box()
                bottom = metrics["y"] + metrics["height"] - players["y"]
                assert 0 < bottom <= VIEWPORT["height"], f"metrics end {bottom:.0f} px below the players"
                page.locator(".aip-players").scroll_into_view_if_needed()
                shots = [SHOTS / "explorer_loop_first_screen.png"]
                page.screenshot(path=str(shots[-1]))
                more.click()
                expect(page.locator(".aip-response .aip-response-rest")).to_be_visible()

                # one click on a worst case by its label (a01, bg03, 0 dB: ΔWER 2.5) loads it
                page.locator(".aip-worst-case", has_text="bg03 @ 0 dB").click()
                expect(response).to_have_text("bird 1 at 0 with delta")
                expect(page.locator(".aip-bg select")).to_have_value("bg03")
                src3, wav3, _ = _mixture_bytes(page)
                assert src3 != src2 and wav3 == expected[("a01", "bg03", 0)]

                page.locator(".aip-worst-panel").scroll_into_view_if_needed()
                shots += [SHOTS / "explorer_worst_cases.png"]
                page.screenshot(path=str(shots[-1]))
                page.locator(".aip-bg-table").scroll_into_view_if_needed()
                shots += [SHOTS / "explorer_backgrounds.png"]
                page.screenshot(path=str(shots[-1]))

                # the condition-family selector: background first and chosen; channel switches the view
                family = page.locator(".aip-family select")
                expect(family).to_have_value("background")
                assert family.locator("option").all_inner_texts() == ["background", "channel"]
                page.select_option(".aip-family select", label="channel")
                expect(page.locator(".aip-mixinfo")).to_contain_text("a01_ch_telephone")
                expect(response).to_have_text("word 1")
                expect(page.locator(".aip-snr")).to_be_hidden()
                expect(page.locator(".aip-mixture-player")).to_contain_text("Transformed speech: telephone")
                expect(page.locator(".aip-family-info")).to_contain_text("low_hz = 300.0")
                src4, wav4, _ = _mixture_bytes(page)
                assert src4 != src3 and wav4 == expected[("a01", "telephone")]
                page.locator(".aip-players").scroll_into_view_if_needed()
                shots += [SHOTS / "explorer_channel_family.png"]
                page.screenshot(path=str(shots[-1]))
            finally:
                ctx.close()
    finally:
        _stop_lab(proc, base, token)
    assert proc.poll() is not None, "jupyter lab is still running"
    elapsed = time.monotonic() - t0
    print(f"browser test: {elapsed:.1f} s; screenshots {', '.join(map(str, shots))}")
    assert all(s.stat().st_size > 10_000 for s in shots)
    assert elapsed < 120, f"the browser test took {elapsed:.0f} s (budget 120 s)"


REPORT_VIEWPORT = {"width": 1280, "height": 900}

# Per table cell that holds a number (a digit, at most 40 characters): its text, the height of its
# content and of one line of its font (a probe), and its box's right edge against the table's box.
_NUMBER_CELLS_JS = """() => Array.from(document.querySelectorAll('table td')).filter(td => {
    const t = td.innerText.trim(); return /\\d/.test(t) && t.length <= 40; }).map(td => {
    const r = document.createRange(); r.selectNodeContents(td);
    const probe = document.createElement('span'); probe.textContent = '0'; td.appendChild(probe);
    const one = probe.getBoundingClientRect().height; probe.remove();
    return {text: td.innerText.trim(), height: r.getBoundingClientRect().height, one: one}; })"""

# Per table: is it in a box that scrolls sideways; when wider than the box, does a line above say so,
# and is its last column inside the box once scrolled to the end.
_WIDE_TABLES_JS = """() => Array.from(document.querySelectorAll('table.tbl'), t => {
    const d = t.closest('div.aip-scroll');
    if (!d) return {boxed: false};
    const wide = d.scrollWidth > d.clientWidth + 1, hint = d.previousElementSibling;
    d.scrollLeft = d.scrollWidth;
    const ths = t.querySelectorAll('thead th'), box = d.getBoundingClientRect();
    const last = ths.length ? ths[ths.length - 1].getBoundingClientRect() : box;
    const out = {boxed: true, wide: wide, overflow: getComputedStyle(d).overflowX,
                 hint: hint && hint.classList.contains('aip-wide') ? hint.innerText : null,
                 lastInside: last.left >= box.left - 1 && last.right <= box.right + 1};
    d.scrollLeft = 0; return out; })"""

# The links of the first section (between the first and the second h2), and whether each resolves.


def _follow_links(page, hrefs, viewport, *, by_name=True):
    """Click each in-page link from the top of the page; its target (by id, else by name when ``by_name``) must then
    lie in view."""
    for href in hrefs:
        page.evaluate("window.scrollTo(0, 0)")
        page.locator(f'a[href="{href}"]').first.click()
        page.wait_for_function(f"location.hash === {json.dumps(href)}")
        top = page.evaluate("""([h, byName]) => { const id = decodeURIComponent(h.slice(1));
            return (document.getElementById(id) || (byName ? document.getElementsByName(id)[0] : null))
                   .getBoundingClientRect().top; }""", [href, by_name])
        assert -1 <= top < viewport["height"], f"{href} is at {top:.0f} px after its link"


_FIRST_SECTION_LINKS_JS = """() => {
    const hs = Array.from(document.querySelectorAll('h2')), first = hs[0], next = hs[1];
    return Array.from(document.querySelectorAll('a[href^="#"]')).filter(a =>
        !a.closest('nav') && !a.classList.contains('anchor-link')
        && (first.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING)
        && (!next || (next.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_PRECEDING))
    ).map(a => { const id = decodeURIComponent(a.getAttribute('href').slice(1));
                 return [a.getAttribute('href'), !!(document.getElementById(id) || document.getElementsByName(id).length)]; }); }"""


def test_report_at_1280_px_findings_numbers_tables_and_figure5(tmp_path):
    """The report of a synthetic run (notebook 09 through papermill, 28 ASR items: accent group g0 has 10
    items, g1 and g2 nine) at 1280 px: the first section is Findings and each of its links resolves to an
    element of the page and brings it into view; no table cell holding a number wraps (its content is one
    line high); every table sits in a box that scrolls sideways, and a table wider than its box says so
    above it and shows its last column when scrolled; the page itself is not wider than the window; the
    contents box has the page's font. Figure 5 draws an interval only where its group has one: its tidy
    data (:func:`aiplib.analysis.paper.accent_bars` of Table 4's files, as the notebook draws it) has no
    interval below ``MIN_N_FOR_INTERVAL`` items and one where a group has that many, and the notebook's
    check that it drew one error bar per interval passed. Screenshots under ``build/browser/``."""
    import nbformat
    import pandas as pd
    from playwright.sync_api import sync_playwright
    from test_report import _execute_09, make_run

    from aiplib.analysis import paper, report, stats

    ws = make_run(tmp_path / "data", n_asr=28, n_kws=4, n_bg=3, snrs=(10, 0), models=("m_a",))
    score_inference(ws)
    executed = _execute_09(ws, tmp_path, n_resamples=50, seed=1)
    nb = nbformat.read(executed, as_version=4)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                if o.get("output_type") == "error"]      # the checks of Figure 5's error bars included
    out = report.render_report(executed, ws.results)
    tabs = ws.results / "tables"
    bars = paper.accent_bars(pd.read_csv(tabs / "table4_accent_dwer_item_means.csv"),
                             pd.read_csv(tabs / "table4_accent_dwer.csv"))
    ours = bars[bars["panel"] == "ours"].set_index("group")
    assert ours["n_items"].to_dict() == {"g0": 10, "g1": 9, "g2": 9}
    has_ci = bars["ci_low_pp"].notna() & bars["ci_high_pp"].notna()
    assert (bars.loc[has_ci, "n_items"] >= stats.MIN_N_FOR_INTERVAL).all()
    assert bars.loc[bars["n_items"] < stats.MIN_N_FOR_INTERVAL, ["ci_low_pp", "ci_high_pp"]].isna().all().all()
    assert ours.loc["g0", ["ci_low_pp", "ci_high_pp"]].notna().all()    # an interval where there is one
    SHOTS.mkdir(parents=True, exist_ok=True)
    shots = [SHOTS / f"report_1280_{k}.png" for k in ("findings", "wide_table", "figure5")]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=REPORT_VIEWPORT)
            page.goto(out["report_html"].as_uri(), wait_until="load")
            heads = page.evaluate("() => Array.from(document.querySelectorAll('h2'), h => h.id)")
            assert heads and heads[0] == "Findings", f"the first section is {heads[:1]}, not Findings"
            links = page.evaluate(_FIRST_SECTION_LINKS_JS)
            assert links, "the Findings link no table or figure"
            assert all(ok for _, ok in links), f"Findings links to nothing: {[h for h, ok in links if not ok]}"
            page.evaluate("document.getElementById('Findings').scrollIntoView()")
            page.screenshot(path=str(shots[0]))
            _follow_links(page, dict(links), REPORT_VIEWPORT)

            page.evaluate("() => { window.scrollTo(0, 0); document.querySelectorAll('details').forEach(d => d.open = true); }")
            cells = page.evaluate(_NUMBER_CELLS_JS)
            assert len(cells) > 100
            wrapped = [c["text"] for c in cells if c["height"] > 1.5 * c["one"]]
            assert not wrapped, f"{len(wrapped)} table cells with a number wrap, e.g. {wrapped[:5]}"
            tables = page.evaluate(_WIDE_TABLES_JS)
            assert tables and all(t["boxed"] for t in tables), "a table is not in a scrolling box"
            wide = [t for t in tables if t["wide"]]
            assert wide, "no table is wider than its box at 1280 px (Table 3 has 16 columns)"
            for t in wide:
                assert t["overflow"] in ("auto", "scroll") and t["lastInside"], t
                assert t["hint"] and "scroll the table sideways" in t["hint"], t
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
            fonts = page.evaluate("""() => [document.querySelector('nav.aip-toc'), document.querySelector('h2 + p, p')]
                                     .map(e => getComputedStyle(e).fontFamily)""")
            assert fonts[0] == fonts[1], fonts
            page.locator("p.aip-wide").first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots[1]))

            fig5 = page.locator('img[alt="figure5_accent_degradation"]')
            assert fig5.count() == 1 and fig5.evaluate("i => i.complete && i.naturalWidth > 0")
            fig5.scroll_into_view_if_needed()
            page.screenshot(path=str(shots[2]))
        finally:
            browser.close()
    assert all(s.stat().st_size > 10_000 for s in shots)


def test_report_copy_in_another_folder_in_headless_chromium(tmp_path):
    """A copy of ``report.html`` alone, in another folder, opened from disk: every figure is
    decoded (``naturalWidth > 0``), the page requests nothing but itself and ``data:`` URIs, and
    each table-of-contents link brings its section's heading into view."""
    from playwright.sync_api import sync_playwright
    from test_report import _execute_09, make_run

    from aiplib.analysis import report

    t0 = time.monotonic()
    ws = make_run(tmp_path / "data", n_asr=4, n_kws=4, n_bg=3, snrs=(10, 0), models=("m_a",))
    score_inference(ws)
    executed = _execute_09(ws, tmp_path, n_resamples=50, seed=1)   # notebook 09 through papermill
    out = report.render_report(executed, ws.results)
    assert out["figures"] == 6 and len(out["toc"]) > 8
    copy = tmp_path / "elsewhere" / "copied report.html"
    copy.parent.mkdir()
    shutil.copy(out["report_html"], copy)                # the page only: no figures/ beside it
    SHOTS.mkdir(parents=True, exist_ok=True)
    shots = [SHOTS / "report_copy_top.png", SHOTS / "report_copy_figure_section.png"]
    t1 = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            requests, failed = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.goto(copy.as_uri(), wait_until="load")
            imgs = page.evaluate("""() => Array.from(document.images, i => ({
                alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
                data: i.src.startsWith('data:image/png;base64,')}))""")
            assert len(imgs) == out["figures"] == 6
            for im in imgs:
                assert im["complete"] and im["w"] > 0 and im["h"] > 0 and im["data"], im
            assert sorted(i["alt"] for i in imgs) == sorted(
                f.stem for f in (ws.results / "figures").glob("*.png"))
            assert failed == []
            assert all(u == copy.as_uri() or u.startswith("data:") for u in requests), requests
            page.screenshot(path=str(shots[0]))

            links = page.locator("nav.aip-toc a")
            assert links.count() == len(out["toc"])
            for k, (_, anchor, title) in enumerate(out["toc"]):
                page.evaluate("window.scrollTo(0, 0)")
                link = links.nth(k)
                assert link.inner_text().strip() == title
                link.click()
                page.wait_for_function(f"location.hash === {json.dumps('#' + anchor)}")
                top, height, scrolled = page.evaluate(
                    "a => [document.getElementById(a).getBoundingClientRect().top, innerHeight, scrollY]",
                    anchor)
                assert -1 <= top < height, f"section {title!r} is at {top:.0f} px after its TOC link"
                assert scrolled > 0, f"the TOC link to {title!r} did not move the page"
                if "(Figure 7)" in title:          # a figure sits right under its section's caption
                    page.screenshot(path=str(shots[1]))
        finally:
            browser.close()
    print(f"report test: {time.monotonic() - t0:.1f} s ({time.monotonic() - t1:.1f} s in Chromium); "
          f"screenshots {', '.join(map(str, shots))}")
    assert all(s.stat().st_size > 10_000 for s in shots)
    assert time.monotonic() - t1 < 60


def test_report_opens_with_findings_in_headless_chromium(tmp_path):
    """The report's first section is Findings and each of its links brings the table or figure it cites into
    view; Figure 5's groups of 10 items have intervals (the notebook's checks count one error bar each)."""
    import pandas as pd
    from playwright.sync_api import sync_playwright
    from test_report import _execute_09, make_run

    from aiplib.analysis import report

    ws = make_run(tmp_path / "data", n_asr=30, n_kws=4, n_bg=3, snrs=(10, 0), models=("m_a",))
    score_inference(ws)
    out = report.render_report(_execute_09(ws, tmp_path, n_resamples=50, seed=1), ws.results)
    t4 = pd.read_csv(ws.results / "tables" / "table4_accent_dwer_item_means.csv")
    assert (t4["n_items"] == 10).all() and t4["ci_low_pp"].notna().all()
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "report_findings.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(out["report_html"].as_uri(), wait_until="load")
            heads = page.evaluate("() => Array.from(document.querySelectorAll('h2'), h => h.id)")
            assert heads[0] == "Findings", heads
            hrefs = page.evaluate("""() => {
                const hs = Array.from(document.querySelectorAll('h2')), f = hs[0], next = hs[1];
                return Array.from(document.querySelectorAll('a[href^="#"]')).filter(a =>
                    !a.closest('nav') && !a.classList.contains('anchor-link')
                    && (f.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING)
                    && (next.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_PRECEDING)
                ).map(a => a.getAttribute('href')); }""")
            assert {"#table-r1", "#figure-7", "#figure-4", "#table-2", "#figure-5", "#table-5"} <= set(hrefs), hrefs
            assert "One model was scored (m_a)" in page.inner_text("body")
            page.evaluate("document.getElementById('Findings').scrollIntoView()")
            page.screenshot(path=str(shot))
            _follow_links(page, hrefs, VIEWPORT, by_name=False)
            caption = page.evaluate("() => document.getElementById('figure-5').parentElement.innerText")
            assert "where a group has ≥ 10 items" in caption
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000


REPORT_800 = {"width": 800, "height": 900}


def test_report_at_800_px_names_the_run_gives_levels_units_and_readable_figures(tmp_path):
    """The report of two models (notebook 09 through papermill) in an 800 px window: the first heading
    and the browser tab name the profile, both models and the date; the Findings show the absolute
    levels (clean and noisy %, the corpus WER of ``conditions_asr.csv``) beside the change; Table 3's
    headers carry units (``Spectral centroid (Hz)`` …); every figure's smallest text, from its PNG's
    recorded font size and dpi, is at least 9 px when the figure is 800 px wide; each fits the window.
    Screenshot ``build/browser/report_800_findings.png``."""
    import pandas as pd
    from PIL import Image
    from playwright.sync_api import sync_playwright
    from test_report import _execute_09, make_run

    from aiplib.analysis import report
    from aiplib.analysis.paper import MIN_FONT_KEY

    ws = make_run(tmp_path / "data", n_asr=12, n_kws=4, n_bg=3, snrs=(10, 0), models=("m_a", "m_b"))
    score_inference(ws)
    out = report.render_report(_execute_09(ws, tmp_path, n_resamples=50, seed=1), ws.results)
    t = pd.read_csv(ws.results / "tables" / "conditions_asr.csv")
    o = t[(t["scope"] == "overall") & (t["model"] == "m_b")].iloc[0]
    c = t[(t["scope"] == "clean") & (t["model"] == "m_b")].iloc[0]
    fonts = {}
    for png in (ws.results / "figures").glob("*.png"):
        with Image.open(png) as im:
            fonts[png.stem] = (float(im.info[MIN_FONT_KEY]), im.info["dpi"][0], im.size[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "report_800_findings.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=REPORT_800)
            page.goto(out["report_html"].as_uri(), wait_until="load")
            h1 = page.locator("h1").first.inner_text().replace("¶", "").strip()
            assert re.fullmatch(r"Results · demo profile · m_a, m_b · \d{4}-\d{2}-\d{2}", h1), h1
            assert page.title() == h1
            findings = page.evaluate("""() => { const f = document.getElementById('Findings'); let t = '';
                for (let e = f.closest('.jp-Cell') || f; e; e = e.nextElementSibling) {
                    if (e !== (f.closest('.jp-Cell') || f) && e.querySelector && e.querySelector('h2')) break;
                    t += e.innerText + '\\n'; }
                return t; }""")
            assert "clean %" in findings and "noisy %" in findings, findings[:500]
            assert f"{c.wer_pp:.1f}" in findings and f"{o.wer_pp:.1f}" in findings and f"{o.delta_pp:+.1f}" in findings
            heads = page.evaluate("""() => Array.from(document.querySelectorAll('th'), h => h.innerText.trim())""")
            for h in ("Spectral centroid (Hz)", "Spectral rolloff (Hz)", "Spectral contrast (dB)",
                      "Zero crossing rate (crossings/sample)", "ASR ΔWER (pp)"):
                assert h in heads, h
            assert "spectral_centroid" not in heads
            page.evaluate("document.getElementById('Findings').scrollIntoView()")
            page.screenshot(path=str(shot))
            imgs = page.evaluate("""() => Array.from(document.images, i => ({alt: i.alt, w: i.naturalWidth,
                                     shown: i.getBoundingClientRect().width}))""")
        finally:
            browser.close()
    assert sorted(i["alt"] for i in imgs) == sorted(fonts) and len(imgs) == 6
    for i in imgs:
        pt, dpi, width = fonts[i["alt"]]
        assert i["w"] == width
        assert pt * dpi / 72 * 800 / width >= 9, (i["alt"], pt, dpi, width)        # at 800 px wide
        assert 0 < i["shown"] <= 800, i                                              # fits the window
    assert shot.stat().st_size > 10_000
