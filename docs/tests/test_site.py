"""The built course site against what it is built from, and in a real browser.

Run after the build (``docs/ci.sh check`` does both), from the docs venv::

    python -m pytest -o addopts="-ra" -p no:cacheprovider --noconftest docs/tests

* every notebook under ``notebooks/`` is a page, in the course's order, with every chart it
  stores;
* every public name of the API reference has its entry;
* a planted broken link and a planted missing image, in a Markdown page and in a notebook, fail
  a build that uses ``docs/conf.py``, and the same pages with the link and image fixed pass;
* headless Chromium opens the landing page, a notebook page and the API page from a local
  server: every image loads as a PNG with a size, and the code blocks carry highlighted tokens
  in a colour of their own.  Screenshots land in ``docs/_build/screenshots/``.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
SITE = DOCS / "_build" / "html"
SHOTS = DOCS / "_build" / "screenshots"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module", autouse=True)
def built_site():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no site under {SITE}: build it first, "
                    f"python -m sphinx -W --keep-going -b html docs docs/_build/html")


def _page(relative: str) -> str:
    return (SITE / relative).read_text(encoding="utf-8")


class _OutputImages(HTMLParser):
    """Counts the ``img`` elements inside a cell's output (``div.cell_output``)."""

    def __init__(self):
        super().__init__()
        self.divs: list[bool] = []  # for each open div: is it a cell output?
        self.count = 0

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            self.divs.append("cell_output" in (dict(attrs).get("class") or "").split())
        elif tag == "img" and any(self.divs):
            self.count += 1

    def handle_endtag(self, tag):
        if tag == "div" and self.divs:
            self.divs.pop()

    @classmethod
    def of(cls, page: str) -> int:
        parser = cls()
        parser.feed(page)
        return parser.count


def _stored_pngs(notebook: Path) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum("image/png" in out.get("data", {}) for c in cells for out in c.get("outputs", []))


# ---- the site holds what it is built from --------------------------------------------------------

def test_every_notebook_is_a_page_in_course_order_with_its_charts():
    assert NOTEBOOKS, "no notebooks found"
    landing = _page("index.html")
    # The toctree of the landing page links the course pages in order (a glob: no list to edit).
    linked = re.findall(r'<a class="reference internal" href="course/([^"#]+)\.html">', landing)
    stems = [nb.stem for nb in NOTEBOOKS]
    assert list(dict.fromkeys(linked)) == stems
    for notebook in NOTEBOOKS:
        page = _page(f"course/{notebook.stem}.html")
        assert _OutputImages.of(page) == _stored_pngs(notebook), notebook.name
        for src in re.findall(r'<img [^>]*src="\.\./(_images/[^"]+)"', page):
            assert (SITE / src).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", src


API = {
    "api/ropelab.html": ["ropelab.rope", "ropelab.rope_qk", "ropelab.fused_qknorm_rope",
                         "ropelab.fused_qknorm_rope_backward", "ropelab.check_errors",
                         "ropelab.describe"],
    "api/torch_ops.html": ["ropelab.torch_ops.rope", "ropelab.torch_ops.fused_qknorm_rope"],
    "api/scaling.html": ["ropelab.scaling.Linear", "ropelab.scaling.NTK", "ropelab.scaling.YaRN",
                         "ropelab.scaling.Llama3", "ropelab.scaling.from_dict"],
    "api/tables.html": ["ropelab.tables.flux_cache", "ropelab.tables.mrope_cache"],
    "api/course.html": ["ropelab.grader.steps.check", "ropelab.grader.grading.Verdict",
                        "ropelab.grader.grading.Verdict.show", "ropelab.grader.grading.Verdict.time"],
}


@pytest.mark.parametrize("page", sorted(API))
def test_every_public_name_has_an_entry_with_its_docstring(page):
    text = _page(page)
    for name in API[page]:
        entry = re.search(rf'<dt class="sig sig-object py" id="{re.escape(name)}">.*?</dt>\s*<dd>(.*?)</dd>',
                          text, re.S)
        assert entry, f"{page}: no entry for {name}"
        prose = re.sub(r"<[^>]+>", "", entry.group(1)).strip()
        assert len(prose) > 20, f"{page}: {name} has no docstring text"


def test_the_readmes_build_command_is_the_one_ci_runs():
    def commands(path: Path) -> list[str]:
        return [c for c in re.findall(r"```bash\n(.+?)\n```", path.read_text(), re.S)
                if "sphinx" in c]

    build = "python -m sphinx -W --keep-going -b html docs docs/_build/html"
    assert [c.endswith(f'pip install -e ".[docs]" && {build}') for c in commands(ROOT / "README.md")] == [True]
    assert commands(ROOT / "README.md") == commands(DOCS / "README.md")
    ci = (DOCS / "ci.sh").read_text()
    assert '-m sphinx -W --keep-going -q -b html docs "$OUT/html"' in ci and 'OUT=docs/_build' in ci


# ---- a broken link or a missing image fails the build --------------------------------------------

def _markdown(title: str, link: str, image: str) -> str:
    return f"# {title}\n\nSee [the other page]({link}).\n\n![a chart]({image})\n"


def _notebook(title: str, link: str, image: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {},
         "source": [f"# {title}\n\n[back]({link})\n\n![chart]({image})\n"]},
        # No stored output: the page must show none (the build executes nothing).
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ['print("executed " + "at build time")']},
    ]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.dumps({"cells": cells, "metadata": {"kernelspec": kernel},
                       "nbformat": 4, "nbformat_minor": 5})


def test_a_broken_link_or_a_missing_image_fails_the_build_and_nothing_else_does(tmp_path):
    """One build with the real configuration (``-c docs``) of four planted pages: a Markdown page
    and a notebook whose links and image exist, and a pair whose link and image do not.  Only
    the broken pair warns, and a warning fails the build (-W)."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(next((SITE / "_images").glob("*.png")), src / "chart.png")  # a real chart
    pages = {
        "index.md": _markdown("Planted", "good.ipynb", "chart.png")
        + "\n```{toctree}\ngood\nbroken\nbroken_notebook\n```\n",
        "good.ipynb": _notebook("Good notebook", "index.md", "chart.png"),
        "broken.md": _markdown("Broken page", "no-such-page.md", "no-such-chart.png"),
        "broken_notebook.ipynb": _notebook("Broken notebook", "no-such-notebook.ipynb",
                                           "no-such-chart.png"),
    }
    for name, text in pages.items():
        (src / name).write_text(text)
    warnings = tmp_path / "warnings.txt"
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-c", str(DOCS), "-w", str(warnings), str(src), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = warnings.read_text().splitlines() if warnings.exists() else []
    report = "\n".join(lines) + done.stderr
    assert done.returncode != 0, report
    for page, target in (("broken.md", "no-such-page.md"),
                         ("broken_notebook.ipynb", "no-such-notebook.ipynb")):
        assert any(page in line and target in line and "xref_missing" in line
                   for line in lines), report
        assert any(page in line and "no-such-chart.png" in line and "not readable" in line
                   for line in lines), report
    quiet = [line for line in lines if "WARNING" in line and "broken" not in line]
    assert quiet == [], report  # the good pages (links and image that exist) build clean
    built = (tmp_path / "html" / "good.html").read_text()
    assert "chart.png" in built and "executed at build time" not in built  # nothing ran


# ---- three pages in headless Chromium --------------------------------------------------------------

# Served beside the site: loads one page in a frame that fills the window (same origin, so it
# can look inside), waits for every image, scrolls the first chart's cell into view for the
# screenshot, and writes what it found as JSON into #result, which --dump-dom prints.
HARNESS = """<!doctype html><meta charset="utf-8"><title>check</title>
<style>body { margin: 0 } iframe { width: 1280px; height: 2400px; border: 0 }</style>
<pre id="result" hidden>pending</pre><iframe id="page"></iframe>
<script>
const frame = document.getElementById("page");
frame.onload = async () => {
  const doc = frame.contentDocument, win = frame.contentWindow;
  const images = [...doc.querySelectorAll("img")];
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  const colour = el => win.getComputedStyle(el).color;
  const blocks = [...doc.querySelectorAll("div.highlight pre")].map(pre => {
    const tokens = [...pre.querySelectorAll("span[class]")];
    return {tokens: tokens.length, coloured: tokens.filter(t => colour(t) !== colour(pre)).length,
            code_cell: !!pre.closest(".cell_input")};
  });
  const chart = images.find(i => i.closest(".cell_output"));
  if (chart) chart.closest(".cell").scrollIntoView();
  document.getElementById("result").textContent = JSON.stringify({
    title: doc.title,
    images: images.map(i => ({src: i.getAttribute("src"), loaded: i.complete && i.naturalWidth > 0,
                              width: i.naturalWidth, output: !!i.closest(".cell_output")})),
    blocks: blocks,
    theme_css: [...doc.styleSheets].some(s => (s.href || "").includes("furo")),
  });
};
frame.src = new URLSearchParams(location.search).get("page");
</script>
"""


@pytest.fixture(scope="module")
def server():
    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/__check__.html"):
                body = HARNESS.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                super().do_GET()

        def log_message(self, *args):  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(SITE)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _chromium(*args: str) -> str:
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: apt-get install -y chromium (docs/ci.sh prepare does)")
        pytest.skip("no chromium here (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,2400",
             "--virtual-time-budget=20000", *args],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _look(server: str, page: str) -> dict:
    """What the harness saw of ``page``; its screenshot goes to docs/_build/screenshots/."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (page.replace("/", "_").removesuffix(".html") + ".png")
    dom = _chromium(f"--screenshot={shot}", "--dump-dom", f"{server}/__check__.html?page=/{page}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    found = re.search(r'<pre id="result"[^>]*>(.*?)</pre>', dom, re.S)
    assert found and found.group(1) != "pending", dom[:2000]
    return json.loads(html.unescape(found.group(1)))


def _assert_rendered(seen: dict, *, charts: int, code_cells: int = 0, blocks: int = 1):
    assert seen["theme_css"], "the theme's stylesheet did not load"
    assert [i for i in seen["images"] if not i["loaded"]] == []
    assert sum(i["output"] for i in seen["images"]) == charts
    assert all(i["width"] > 100 for i in seen["images"] if i["output"])
    highlighted = [b for b in seen["blocks"] if b["coloured"] > 0]
    assert len(highlighted) >= blocks, seen["blocks"]
    assert sum(b["code_cell"] for b in highlighted) >= code_cells


NOTEBOOK_PAGE = next(nb for nb in NOTEBOOKS if _stored_pngs(nb))  # the first with a chart
PAGES = ("index.html", f"course/{NOTEBOOK_PAGE.stem}.html", "api/ropelab.html")


@pytest.fixture(scope="module")
def seen(server) -> dict:
    """What Chromium showed of each of the three pages (opened side by side: each launch mostly
    waits)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(PAGES)) as pool:
        return dict(zip(PAGES, pool.map(lambda page: _look(server, page), PAGES)))


def test_landing_page_renders(seen):
    page = seen["index.html"]
    assert page["title"].startswith("ropelab")
    _assert_rendered(page, charts=0, blocks=1)  # the setup command, as a bash block


def test_a_notebook_page_renders_its_charts_and_code(seen):
    cells = json.loads(NOTEBOOK_PAGE.read_text(encoding="utf-8"))["cells"]
    code_cells = sum(c["cell_type"] == "code" and "".join(c["source"]).strip() != "" for c in cells)
    page = seen[f"course/{NOTEBOOK_PAGE.stem}.html"]
    _assert_rendered(page, charts=_stored_pngs(NOTEBOOK_PAGE), code_cells=code_cells,
                     blocks=code_cells)


def test_the_api_page_renders_its_examples(seen):
    page = seen["api/ropelab.html"]
    assert page["title"].startswith("ropelab")
    _assert_rendered(page, charts=0, blocks=1)  # the docstrings' >>> examples
