"""The report in a real browser: headless Debian Chromium opens the page from disk.

Chromium comes from Debian's `chromium` package; when it is missing the setup installs it
with apt-get where that is possible (root, apt), else the tests skip and say why. Playwright
(pinned in the dev group) drives the system Chromium; it downloads no browser of its own.
The page is read at 1,280 px, a laptop screen: its layout is measured there (the first screen,
the paper-A comparison's height, nothing wider than the window) and screenshots are saved
(into $MEMCAP_SCREENSHOTS when set, to look at them; else the test's temporary folder).
"""

from pathlib import Path

import pytest
from browser import (
    COMPARISON_MAX,
    FIRST_SCREEN,
    WIDTH,
    assert_figures_rendered,
    assert_reads_at_a_glance,
    open_in_browser,
)
from PIL import Image

from memcap.report import write_report

pytestmark = pytest.mark.browser


def test_page_renders_in_chromium_without_errors(tmp_path):
    from test_report_render import TEMPLATE, fabricate_run

    inputs = fabricate_run(tmp_path / "run")
    page = tmp_path / "report.html"
    context = write_report(inputs, TEMPLATE, page)
    result = open_in_browser(page, tmp_path)
    assert_figures_rendered(result, context.figure_count)
    assert context.figure_count == 10
    assert_reads_at_a_glance(result)
    assert result["closed"]["checks"] == len(context.layers)
    Image.MAX_IMAGE_PIXELS = None
    assert Image.open(result["first_screen"]).size == (WIDTH, FIRST_SCREEN)
    assert Image.open(result["screenshot"]).size[0] == WIDTH


def test_a_stored_default_run_reads_at_a_glance(tmp_path):
    """The page of a stored default run (tests/data/default_run): its tables are as wide as a
    real run's, so a table cut off on the right fails here, on a clean clone, without a run."""
    from report_fixture import load
    from test_report_render import TEMPLATE

    inputs = load(tmp_path / "run")
    page = tmp_path / "stored_run.html"
    context = write_report(inputs, TEMPLATE, page)
    assert len(context.layers) >= 30 and context.paper_a_real is not None
    result = open_in_browser(page, tmp_path, name="stored_run")
    assert not result["errors"], result["errors"]
    assert_reads_at_a_glance(result)


def test_the_run_report_reads_at_a_glance(tmp_path):
    """The workflow's own page (reports/report.html), when a run has made one."""
    page = Path(__file__).resolve().parents[2] / "reports" / "report.html"
    if not page.exists():
        pytest.skip("no reports/report.html: run the workflow first")
    result = open_in_browser(page, tmp_path, name="run_report")
    assert not result["errors"], result["errors"]
    assert_reads_at_a_glance(result)


def test_layout_faults_are_caught(tmp_path):
    """A page without the strip, with a too tall comparison and a too wide table fails."""
    wide = "<td>" + "x" * 400 + "</td>"
    page = tmp_path / "wide.html"
    page.write_text(
        f'<html><body><h3 id="paper-a-real">A</h3><div style="height: 3000px"></div>'
        f'<div class="table-wrap" style="overflow-x: auto"><table><tr>{wide}</tr></table></div>'
        f"<table><tr>{wide}</tr></table></body></html>"
    )
    result = open_in_browser(page, tmp_path)
    assert result["closed"]["comparison"] > COMPARISON_MAX
    assert result["closed"]["scroll_width"] > WIDTH and result["closed"]["cut_off"]
    with pytest.raises(AssertionError, match="no depth strip"):
        assert_reads_at_a_glance(result)


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
