"""Every figure the pipeline draws, laid out so that no legend covers data or a label and no
axis label covers tick labels: checked on the drawn artists' window extents (Matplotlib's own
layout, in display pixels), on the stored default run's tables (tests/data/default_run).

A legend must not overlap any axes' data artists (lines, collections, patches, texts, clipped
to their axes), any tick label, axis label or title, or another legend; an axis label must not
overlap any tick label. The capacity stage's figure is checked the same way.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox
from report_fixture import FIXTURE

from memcap.assumptions import checks, figures
from memcap.numerics import context_ranks
from memcap.numerics.error import ErrorScale

RESULTS = FIXTURE / "files" / "results"


def _box(artist, renderer) -> Bbox | None:
    """The artist's extent in display pixels, None when invisible, empty or not finite."""
    if not artist.get_visible():
        return None
    if hasattr(artist, "get_text") and not artist.get_text().strip():
        return None
    box = artist.get_window_extent(renderer)
    if not np.all(np.isfinite(box.extents)) or (box.width <= 0 and box.height <= 0):
        return None
    return box


def _overlap(a: Bbox, b: Bbox, slack: float = 0.5) -> bool:
    """Whether two boxes share more than ``slack`` pixels in both directions."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def _in_view(box: Bbox, axes: Bbox, along_x: bool) -> bool:
    """Whether a tick label stands at a tick inside the axes' view (Matplotlib keeps labels of
    ticks beyond the limits, and does not draw them)."""
    if along_x:
        return axes.x0 - 1 <= (box.x0 + box.x1) / 2 <= axes.x1 + 1
    return axes.y0 - 1 <= (box.y0 + box.y1) / 2 <= axes.y1 + 1


def _data_boxes(ax, renderer) -> list[tuple[str, Bbox]]:
    """The axes' data artists clipped to the axes: what a legend must not cover."""
    artists = [*ax.lines, *ax.collections, *ax.patches, *ax.texts]
    boxes = []
    for artist in artists:
        box = _box(artist, renderer)
        if box is None:
            continue
        clipped = Bbox.intersection(box, ax.bbox)
        if clipped is not None:
            boxes.append((f"{type(artist).__name__} {artist.get_label()!r}", clipped))
    return boxes


def layout_faults(fig: Figure) -> list[str]:
    """What covers what on ``fig``, in words (empty: a clean layout)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None] + list(fig.legends)
    ticks, labels, titles = [], [], []
    for i, ax in enumerate(axes):
        for tick in ax.get_xticklabels() + ax.get_yticklabels():
            box = _box(tick, renderer)
            if box is not None and _in_view(box, ax.bbox, tick in ax.get_xticklabels()):
                ticks.append((f"axes {i} tick {tick.get_text()!r}", box))
        for label in (ax.xaxis.label, ax.yaxis.label):
            box = _box(label, renderer)
            if box is not None:
                labels.append((f"axes {i} label {label.get_text()!r}", box))
        for title in (ax.title, ax._left_title, ax._right_title):
            box = _box(title, renderer)
            if box is not None:
                titles.append((f"axes {i} title", box))
    faults = []
    for j, legend in enumerate(legends):
        box = legend.get_window_extent(renderer)
        covered = [d for ax in axes for d in _data_boxes(ax, renderer)] + ticks + labels + titles
        faults += [f"legend {j} covers {name}" for name, other in covered if _overlap(box, other)]
    for (i, a), (j, b) in itertools.combinations(enumerate(legends), 2):
        if _overlap(a.get_window_extent(renderer), b.get_window_extent(renderer)):
            faults.append(f"legends {i} and {j} overlap")
    faults += [
        f"{label} covers {tick}"
        for (label, box), (tick, other) in itertools.product(labels, ticks)
        if _overlap(box, other)
    ]
    return faults


def _context_table() -> pd.DataFrame:
    """A context-rank table from the real code: 40 contexts, one with a repeated token."""
    contexts = np.random.default_rng(0).standard_normal((40, 6, 16)).astype(np.float32)
    contexts[0, 5] = contexts[0, 4]
    return checks.context_table(context_ranks(contexts), error=ErrorScale(1e-6, "test"))


def _saturation() -> pd.DataFrame:
    """Per-head saturation rows shaped as the sweeps write them (one head each)."""
    summary = pd.read_csv(RESULTS / "synthetic" / "summary.csv")
    return summary[["sweep", "H", "n", "d_h", "context", "task", "T", "seed", "saturation"]].assign(
        head=0
    )


def _figures() -> dict[str, callable]:
    """Every figure function of the package, each on its stage's real output."""
    from memcap.aot.figures import plot_sweep as aot_sweep
    from memcap.capacity.figures import plot_real_capacity
    from memcap.synthetic.figures import plot_saturation
    from memcap.synthetic.figures import plot_sweep as synthetic_sweep

    profile = pd.read_csv(
        RESULTS / "assumptions" / "jobs" / "bert-base-random" / "1" / "kruskal_profile.csv"
    )
    depth = pd.read_csv(RESULTS / "assumptions" / "dinov2-s14-pretrained" / "depth.csv")
    capacity = pd.read_csv(RESULTS / "synthetic" / "capacity.csv")
    aot = pd.read_csv(RESULTS / "aot" / "summary.csv")
    drawn = {
        "assumptions profile": lambda: figures.plot_profile(profile, 64, 768, "bert · layer 1"),
        "assumptions contexts": lambda: figures.plot_context_ranks(_context_table(), 6, "c"),
        "assumptions depth": lambda: figures.plot_depth(depth, "dinov2 · depth profile"),
        "synthetic saturation": lambda: plot_saturation(_saturation()),
        "capacity real": lambda: plot_real_capacity(
            pd.read_csv(RESULTS / "capacity" / "real.csv"),
            pd.read_csv(RESULTS / "capacity" / "shared_spread.csv"),
        ),
    }
    for sweep in capacity["sweep"].unique():
        drawn[f"synthetic {sweep}"] = lambda sweep=sweep: synthetic_sweep(capacity, sweep)
    for sweep, rows in aot.groupby("sweep", sort=False):
        drawn[f"aot {sweep}"] = lambda rows=rows: aot_sweep(rows)
    return drawn


FIGURES = _figures()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_legend_covers_data_and_no_label_covers_ticks(name):
    import matplotlib.pyplot as plt

    fig = FIGURES[name]()
    try:
        assert layout_faults(fig) == []
    finally:
        plt.close(fig)


def test_the_check_finds_a_legend_on_the_data_and_a_label_on_the_ticks():
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    left.plot(np.arange(10), np.arange(10), label="rising")
    left.legend(loc="center")  # in the middle of its line
    right.plot([0, 1], [1e6, 2e6])
    right.set_ylabel("a label")
    right.yaxis.set_label_coords(-0.08, 0.5)  # pulled onto the tick labels
    faults = layout_faults(fig)
    plt.close(fig)
    assert any(f.startswith("legend 0 covers Line2D 'rising'") for f in faults), faults
    assert any("label 'a label' covers" in f for f in faults), faults
