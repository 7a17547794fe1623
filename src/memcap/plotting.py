"""One seaborn theme for every figure, and saving helpers."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

THEME = {"style": "whitegrid", "context": "notebook", "palette": "colorblind"}


def set_theme() -> None:
    """Apply the shared theme; call once before drawing."""
    sns.set_theme(**THEME)


def save_figure(fig: plt.Figure, path: str | Path, dpi: int = 110) -> None:
    """Save as PNG (tight bounding box) and close the figure."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
