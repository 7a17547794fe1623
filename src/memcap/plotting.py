"""One theme for every figure, and saving helpers.

The theme is seaborn's look (whitegrid, notebook context, colorblind palette) through the copies
of those styles that Matplotlib ships, so a job that draws a plain Matplotlib figure does not
import seaborn (and the SciPy and pandas it imports); seaborn's plots follow the same rcParams.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

THEME = ("seaborn-v0_8-whitegrid", "seaborn-v0_8-notebook", "seaborn-v0_8-colorblind")


def set_theme() -> None:
    """Apply the shared theme; call once before drawing."""
    plt.style.use(list(THEME))


def legend_beside(ax: plt.Axes, **kwargs) -> None:
    """The axes' legend to the right of its data area, where it covers no data whatever the
    data (a figure drawn with ``layout="constrained"`` makes room for it)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(
            handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
            **kwargs,
        )  # fmt: skip


def save_figure(fig: plt.Figure, path: str | Path, dpi: int = 110) -> None:
    """Save as PNG (tight bounding box) and close the figure."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
