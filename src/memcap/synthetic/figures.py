"""Figures of the synthetic stage: each law on its seeds against H / n / d_h, and saturation."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy.optimize import isotonic_regression

from memcap.laws import MARGIN, LawTest, p_text
from memcap.plotting import legend_beside, set_theme
from memcap.synthetic.laws import curve_tests, estimates, notion
from memcap.synthetic.settings import SWEPT
from memcap.theory import THEOREM

LABELS = {"H": "heads H", "n": "context size n", "d_h": "head dimension d_h"}
YLABELS = {
    "fitted_T": "fitted_T: largest T fitted exactly (bracket midpoint)",
    "capacity": "memorized examples (capacity)",
}


def plot_sweep(capacity: pd.DataFrame, sweep: str) -> plt.Figure:
    """One panel per law and curve of ``sweep`` (:func:`memcap.synthetic.laws.curve_tests`):
    every seed's value of the deciding notion (fitted_T where bisected, with the most-memorized
    means dotted beside it; else the capacity), the seed means ± standard errors, the law's
    fit with its band, and the law's outcome and p-value in the title. Censored seeds are
    hollow, seeds at chance grey crosses; black dashed: Theorem 1's H(n−1)+1, the
    construction's H(d_h−1)+1 below d_h = n (not drawn beyond d_h = n, where it does not
    change)."""
    set_theme()
    data = capacity[capacity["sweep"] == sweep]
    deciding = notion(data)
    panels = list(curve_tests(data))
    fig, axes = plt.subplots(
        1, len(panels), figsize=(6.2 * len(panels), 4.0), squeeze=False, sharey=True,
        layout="constrained",
    )  # fmt: skip
    palette = dict(zip(["shared", "random"], sns.color_palette(n_colors=2), strict=True))
    for ax, (keys, law, rows, result) in zip(axes[0], panels, strict=True):
        color = palette.get(keys["context"], "C0")
        _points(ax, rows, color)
        _law_fit(ax, rows, result, color, keys["n"])
        bound = rows.groupby("value")["bound"].first()
        if sweep != "head_dim" or law.startswith("grows"):
            ax.plot(bound.index, bound.values, "k--", linewidth=1, label=_bound_label(rows))
        ax.set_xlabel(LABELS[SWEPT[sweep]])
        ax.set_ylabel(YLABELS[deciding])
        if deciding == "fitted_T":
            most = estimates(rows, "most_memorized")
            ax.plot(most.index, most["mean"], ":", color="grey", linewidth=1,
                    label="most memorized (seed mean)")  # fmt: skip
        p_value = "" if np.isnan(result.p_value) else f", {p_text(result.p_value, result.p_floor)}"
        ax.set_title(
            f"{law}: {result.outcome}\n{keys['context']}, {keys['task']} ({result.test}{p_value})",
            fontsize=9,
        )
        legend_beside(ax, fontsize=7)
    return fig


def _bound_label(rows: pd.DataFrame) -> str:
    """The dashed line's label: Theorem 1's H(n−1)+1, and the construction's H(d_h−1)+1 where
    the curve has d_h < n (never the count at n there)."""
    kinds = set(rows.get("bound_kind", pd.Series(THEOREM, index=rows.index)))
    return "H(n−1)+1" if kinds <= {THEOREM} else "H(min(n, d_h)−1)+1 (construction below n)"


def _points(ax: plt.Axes, rows: pd.DataFrame, color) -> None:
    """Every seed's capacity (hollow: a lower bound, taken as right-censored; grey crosses: at
    chance) and the seed means ± standard errors."""
    censored = rows.get("lower_bound", pd.Series(False, index=rows.index)).astype(bool)
    chance = rows.get("at_chance", pd.Series(False, index=rows.index)).astype(bool)
    censored &= ~chance
    jitter = (rows["seed"].rank(method="dense") - rows["seed"].nunique() / 2) * 0.03
    x = rows["value"] + jitter * max(1.0, float(np.ptp(rows["value"])) / 10)
    plain = ~censored & ~chance
    ax.scatter(x[plain], rows["capacity"][plain], color=color, alpha=0.5, s=14,
               label="seeds")  # fmt: skip
    if censored.any():
        ax.scatter(x[censored], rows["capacity"][censored], facecolors="none",
                   edgecolors=color, s=18, label="lower bound (censored)")  # fmt: skip
    if chance.any():
        ax.scatter(x[chance], rows["capacity"][chance], marker="x", color="grey", s=18,
                   label="at chance (left out)")  # fmt: skip
    stats = estimates(rows)
    ax.errorbar(stats.index, stats["mean"], yerr=stats["se"], fmt="_", color="black",
                capsize=3, markersize=10, label="seed mean ± SE")  # fmt: skip


def _law_fit(ax: plt.Axes, rows: pd.DataFrame, result: LawTest, color, n: int) -> None:
    """The law's fit: the line and its 95% band, the isotonic fit of the means, or the band up
    to +10% over the mean at d_h = n (the non-superiority margin)."""
    values = np.sort(rows["value"].unique()).astype(float)
    if result.coefficients:
        grid = np.linspace(values.min(), values.max(), 60)
        mean, low, high = result.band(grid)
        ax.plot(grid, mean, color=color, linewidth=1.5, label="fitted line")
        ax.fill_between(grid, low, high, color=color, alpha=0.2, label="95% band")
    elif result.law == "grows":
        stats = estimates(rows)
        fit = isotonic_regression(stats["mean"].to_numpy(), weights=stats["count"].to_numpy())
        ax.plot(stats.index, fit.x, color=color, linewidth=1.5, label="isotonic fit of means")
    elif result.law == "saturates":
        reference = float(rows.loc[rows["value"] == n, "capacity"].mean())
        ax.axhspan(reference, reference * (1 + MARGIN), color=color, alpha=0.2,
                   label=f"up to +{MARGIN:.0%} over the mean at d_h = n")  # fmt: skip
        ax.axhline(reference, color=color, linewidth=1.0)


def plot_saturation(saturation: pd.DataFrame) -> plt.Figure:
    """Per-head softmax saturation against T, one panel per sweep, hue = swept value."""
    set_theme()
    sweeps = list(dict.fromkeys(saturation["sweep"]))
    fig, axes = plt.subplots(
        1, len(sweeps), figsize=(6.2 * len(sweeps), 4.0), squeeze=False, layout="constrained"
    )
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
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7)
    return fig


def _fixed(panel: pd.DataFrame, swept: str) -> str:
    names = [c for c in ("H", "n", "d_h") if c != swept]
    return ", ".join(f"{c}={panel[c].iloc[0]}" for c in names)
