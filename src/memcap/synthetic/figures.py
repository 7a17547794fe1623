"""Figures of the synthetic stage: memorized examples against H / n / d_h, and saturation."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from memcap.plotting import set_theme
from memcap.synthetic.laws import estimates
from memcap.synthetic.settings import SWEPT

LABELS = {"H": "heads H", "n": "context size n", "d_h": "head dimension d_h"}


def plot_sweep(capacity: pd.DataFrame, fits: pd.DataFrame, sweep: str) -> plt.Figure:
    """Memorized count (capacity estimate) against the swept parameter, one panel per task.

    Per context kind: every seed's capacity (dots), the best seed (solid: the estimate the
    laws are checked on, see :mod:`memcap.synthetic.laws`), the seed mean (thin), the linear
    fit over every seed (dotted, slope and R² in the legend) and the certified capacity with
    random attention (crosses, dashed). Black dashed: the theory line H(n−1)+1.
    """
    set_theme()
    data = capacity[capacity["sweep"] == sweep]
    tasks = sorted(data["task"].unique())
    swept = data["swept"].iloc[0]
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.0 * len(tasks), 4.4), squeeze=False)
    palette = dict(zip(["shared", "random"], sns.color_palette(n_colors=2), strict=True))
    for ax, task in zip(axes[0], tasks, strict=True):
        panel = data[data["task"] == task]
        for context, part in panel.groupby("context"):
            color = palette[context]
            stats = estimates(part)  # what the laws are checked on
            certified = part.groupby("value")["certified"].mean()
            ax.scatter(part["value"], part["capacity"], color=color, alpha=0.35, s=14)
            ax.plot(
                stats.index,
                stats["best"],
                "o-",
                color=color,
                label=f"trained, best of {stats['count'].max()}, {context}",
            )
            ax.plot(
                stats.index, stats["mean"], "-", color=color, alpha=0.5, linewidth=0.8,
                label=f"trained, seed mean, {context}",
            )  # fmt: skip
            ax.plot(
                certified.index,
                certified.values,
                "x--",
                color=color,
                alpha=0.7,
                label=f"certified (random attention), {context}",
            )
            fit = fits[
                (fits["sweep"] == sweep)
                & (fits["context"] == context)
                & (fits["task"] == task)
                & (fits["quantity"] == "capacity")
            ].iloc[0]
            x = np.linspace(fit["x_min"], fit["x_max"], 50)
            ax.plot(
                x,
                fit["slope"] * x + fit["intercept"],
                ":",
                color=color,
                linewidth=2,
                label=f"fit {context}: slope {fit['slope']:.1f}, R² {fit['r2']:.2f}",
            )
        theory = panel.groupby("value")["bound"].first()
        ax.plot(theory.index, theory.values, "k--", linewidth=1, label="theory H(n−1)+1")
        if sweep == "head_dim":
            ax.axvline(panel["n"].iloc[0], color="grey", linewidth=0.8)
        ax.set_xlabel(LABELS[swept])
        ax.set_ylabel("memorized examples")
        ax.set_title(f"{task}: fixed {_fixed(panel, swept)}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_saturation(saturation: pd.DataFrame) -> plt.Figure:
    """Per-head softmax saturation against T, one panel per sweep, hue = swept value."""
    set_theme()
    sweeps = list(dict.fromkeys(saturation["sweep"]))
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5.0 * len(sweeps), 4.0), squeeze=False)
    for ax, sweep in zip(axes[0], sweeps, strict=True):
        part = saturation[saturation["sweep"] == sweep]
        swept = SWEPT[sweep]
        # Categorical hue, so the legend lists the swept values themselves.
        order = [str(v) for v in sorted(part[swept].unique())]
        sns.lineplot(
            data=part.assign(**{swept: part[swept].astype(str)}),
            x="T",
            y="saturation",
            hue=swept,
            hue_order=order,
            style="context",
            marker="o",
            palette=sns.color_palette("viridis", len(order)),
            errorbar=None,
            ax=ax,
        )
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("fraction of examples with a weight > threshold")
        ax.set_title(f"{sweep} sweep")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fixed(panel: pd.DataFrame, swept: str) -> str:
    names = [c for c in ("H", "n", "d_h") if c != swept]
    return ", ".join(f"{c}={panel[c].iloc[0]}" for c in names)
