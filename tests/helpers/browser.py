"""The report in a real browser, for the tests: headless Debian Chromium opens a page from
disk at 1,280 px (a laptop screen), measures its layout and saves screenshots (into
$MEMCAP_SCREENSHOTS when set; else the test's temporary folder). Chromium comes from Debian's
`chromium` package, installed with apt-get when missing and possible; else the tests skip.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, FIRST_SCREEN = 1280, 900  # the window, px
COMPARISON_MAX = 2500  # px: paper A's comparison reads in under three screens
# The page's layout, measured in the browser: its size, the depth strip's box, the first model's
# grant under it, the first link to the rules, the paper-A comparison's height (its heading to
# the end of its notes) and scroll wrappers whose content is wider than they are (cut off on the
# right until scrolled).
LAYOUT_JS = """() => {
    const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                       return {top: r.top + scrollY, bottom: r.bottom + scrollY, right: r.right}; };
    const head = document.getElementById('paper-a-real');
    let end = head;
    for (let e = head && head.nextElementSibling; e && !/^H[1-3]$/.test(e.tagName);
         e = e.nextElementSibling) end = e;
    return {height: document.documentElement.scrollHeight,
            scroll_width: document.documentElement.scrollWidth,
            strip: box(document.getElementById('depth-strip')),
            grant: box(document.querySelector('.strips tr.grant')),
            rules: box(document.querySelector('main a[href="#method"]')),
            strip_cells: document.querySelectorAll('.strips .cell').length,
            checks: document.querySelectorAll('table.glance tbody tr').length,
            comparison: head ? box(end).bottom - box(head).top : null,
            cut_off: Array.from(document.querySelectorAll('.table-wrap'))
                .filter(w => w.scrollWidth > w.clientWidth + 1)
                .map(w => w.textContent.trim().slice(0, 60))};
}"""
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> Path:
    """Debian's Chromium, installed with apt-get when absent and allowed; else skip."""
    if CHROMIUM.exists():
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium is absent and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"installing chromium failed: {' '.join(command)}: {done.stderr[-500:]}")
    if not CHROMIUM.exists():
        pytest.skip("apt-get installed chromium but /usr/bin/chromium is missing")
    return CHROMIUM


def screenshot_dir(workdir: Path) -> Path:
    """Where screenshots go: $MEMCAP_SCREENSHOTS when set, else ``workdir``."""
    folder = Path(os.environ.get("MEMCAP_SCREENSHOTS") or workdir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_in_browser(page_path: Path, workdir: Path, name: str = "") -> dict:
    """Open ``page_path`` (file://) in headless Chromium, 1,280 px wide, with a fresh profile.

    Returns the console errors, page errors, requests that left the page's own file, the
    images (loaded or not, with their boxes), the layout as first shown (``closed``) and with
    every ``<details>`` open (``opened``), and the paths of a first-screen and a full-page
    screenshot (``name``, default the page's stem, names the screenshots).
    """
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = ensure_chromium()
    url = page_path.resolve().as_uri()
    errors, outside = [], []
    shots = screenshot_dir(workdir)
    name = name or page_path.stem
    screenshot, first_screen = shots / f"{name}.png", shots / f"{name}_top.png"
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(workdir / "profile"),  # a fresh --user-data-dir
            executable_path=str(chromium),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": WIDTH, "height": FIRST_SCREEN},
        )
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url[:80]}"))
        page.on("request", lambda r: None if r.url in (url,) else outside.append(r.url[:80]))
        page.goto(url, wait_until="load")
        page.screenshot(path=str(first_screen))
        closed = page.evaluate(LAYOUT_JS)
        # The per-layer cards are collapsed <details>: open them all, as a reader would.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        images = page.evaluate(
            """() => Array.from(document.images).map(img => {
                const box = img.getBoundingClientRect();
                return {loaded: img.complete && img.naturalWidth > 0,
                        x: box.left + window.scrollX, y: box.top + window.scrollY,
                        width: box.width, height: box.height};
            })"""
        )
        opened = page.evaluate(LAYOUT_JS)
        page.screenshot(path=str(screenshot), full_page=True)
        context.close()
    outside = [u for u in outside if not u.startswith("data:")]
    return {
        "errors": errors,
        "outside": outside,
        "images": images,
        "screenshot": screenshot,
        "first_screen": first_screen,
        "closed": closed,
        "opened": opened,
    }


def assert_reads_at_a_glance(result: dict) -> None:
    """The depth strip on the first screen with a cell per check, the first model's grant and
    the link to the rules there too, the comparison short, nothing cut off on the right (as
    first shown, and with every ``<details>`` open)."""
    closed, opened = result["closed"], result["opened"]
    assert closed["strip"] is not None, "no depth strip"
    assert closed["strip"]["top"] < FIRST_SCREEN - 60, closed["strip"]  # its first row shows
    assert closed["rules"] is not None and closed["rules"]["bottom"] < FIRST_SCREEN, closed["rules"]
    if closed["grant"] is not None:  # a model where Theorem 1 applies somewhere
        assert closed["grant"]["bottom"] < FIRST_SCREEN, closed["grant"]
    assert closed["strip_cells"] == closed["checks"] > 0
    assert closed["comparison"] is not None and closed["comparison"] <= COMPARISON_MAX
    for layout in (closed, opened):
        assert layout["scroll_width"] <= WIDTH, layout
        assert not layout["cut_off"], layout["cut_off"]


def assert_figures_rendered(result: dict, expected_images: int) -> None:
    """Every figure loaded, and its area on the screenshot holds a drawing (not blank)."""
    assert not result["errors"], result["errors"]
    assert not result["outside"], f"the page fetched something besides itself: {result['outside']}"
    images = result["images"]
    assert len(images) == expected_images
    assert all(img["loaded"] for img in images)
    Image.MAX_IMAGE_PIXELS = None  # a long page makes a tall screenshot
    shot = np.asarray(Image.open(result["screenshot"]).convert("L"), dtype=float)
    for img in images:
        x, y = int(img["x"]), int(img["y"])
        crop = shot[y : y + int(img["height"]), x : x + int(img["width"])]
        assert crop.size > 100 * 100, img
        # A rendered plot: ink (axes, text, lines; thin ones grey once the PNG is scaled down
        # to its column) on a light background.
        assert (crop < 160).mean() > 0.005, img
        assert crop.std() > 10, img
