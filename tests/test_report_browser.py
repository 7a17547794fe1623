"""The report in a real browser: headless Debian Chromium opens the page from disk.

Chromium comes from Debian's `chromium` package; when it is missing the setup installs it
with apt-get where that is possible (root, apt), else the tests skip and say why. Playwright
(pinned in the dev group) drives the system Chromium; it downloads no browser of its own.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from memcap.report import write_report

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
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


def open_in_browser(page_path: Path, workdir: Path) -> dict:
    """Open ``page_path`` (file://) in headless Chromium with a fresh profile.

    Returns the console errors, page errors, requests that left the page's own file, the
    images (loaded or not, with their boxes) and the path of a full-page screenshot.
    """
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = ensure_chromium()
    url = page_path.resolve().as_uri()
    errors, outside = [], []
    screenshot = workdir / "screenshot.png"
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(workdir / "profile"),  # a fresh --user-data-dir
            executable_path=str(chromium),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url[:80]}"))
        page.on("request", lambda r: None if r.url in (url,) else outside.append(r.url[:80]))
        page.goto(url, wait_until="load")
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
        page.screenshot(path=str(screenshot), full_page=True)
        context.close()
    outside = [u for u in outside if not u.startswith("data:")]
    return {"errors": errors, "outside": outside, "images": images, "screenshot": screenshot}


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
        # A rendered plot: dark ink (axes, text, lines) on a light background.
        assert (crop < 128).mean() > 0.005, img
        assert crop.std() > 10, img


def test_page_renders_in_chromium_without_errors(tmp_path):
    from test_report_render import TEMPLATE, fabricate_run

    inputs = fabricate_run(tmp_path / "run")
    page = tmp_path / "report.html"
    context = write_report(inputs, TEMPLATE, page)
    result = open_in_browser(page, tmp_path)
    assert_figures_rendered(result, context.figure_count)
    assert context.figure_count == 10


def test_console_errors_and_blank_figures_are_caught(tmp_path):
    import base64
    import io

    blank = io.BytesIO()
    Image.new("RGB", (400, 300), "white").save(blank, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(blank.getvalue()).decode()
    page = tmp_path / "bad.html"
    page.write_text(
        f'<html><body><img src="{uri}"><script>console.error("boom")</script></body></html>'
    )
    result = open_in_browser(page, tmp_path)
    assert any("boom" in error for error in result["errors"])
    with pytest.raises(AssertionError):
        assert_figures_rendered({**result, "errors": []}, 1)
