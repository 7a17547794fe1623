"""Figure of the capacity stage: certified capacity of real embeddings against H."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from memcap.plotting import set_theme

MARKERS = ("o", "s", "^", "D", "v", "P", "X")
MARKER = {"markersize": 5, "markeredgewidth": 1.2}  # the theme draws no marker edges


def plot_real_capacity(real: pd.DataFrame, spread: pd.DataFrame) -> plt.Figure:
    """Certified capacity on real embeddings against H, per model and layer.

    Left: every example with one shared context, the median and range over every shared
    context × attention draw (``spread``), against each context size's min(T, H(n−1)+1)
    (dashed) — the configuration whose capacity depends on n. Right: every example with its
    own context, how far its rank falls short of the ceiling min(T, H·d) (0: at the ceiling, the
    sizes and not the data). A filled marker is a resolved rank (every run resolved, on the
    left), an open one is not a single number. The legend sits below both panels and the
    layout is constrained, so neither the legend nor a label can cover data or ticks.
    """
    set_theme()
    fig, (shared_ax, own_ax) = plt.subplots(1, 2, figsize=(10.0, 5.4), layout="constrained")
    models = list(dict.fromkeys(real["model"]))
    layers = list(dict.fromkeys(real["layer"].astype(str)))
    colors = dict(zip(models, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3, strict=False))
    markers = dict(zip(layers, MARKERS * (len(layers) // len(MARKERS) + 1), strict=False))
    own = real[real["contexts"] == "own"]
    for (model, layer), group in own.groupby(["model", "layer"], sort=False):
        style = {"color": colors[model], "marker": markers[str(layer)]}
        group = group.sort_values("H")
        _line(own_ax, group["H"], group["ceiling"] - group["certified"], group["resolved"], style)
    shared = spread if len(spread) else _first_runs(real)
    for (model, layer), group in shared.groupby(["model", "layer"], sort=False):
        style = {"color": colors[model], "marker": markers[str(layer)]}
        group = group.sort_values("H")
        resolved = group["spread_resolved"] == group["spread_runs"]
        _line(shared_ax, group["H"], group["spread_median"], resolved, style)
        shared_ax.fill_between(group["H"], group["spread_min"], group["spread_max"],
                               color=colors[model], alpha=0.15, linewidth=0)  # fmt: skip
    _bounds(shared_ax, real[real["contexts"] == "shared"])
    runs = int(shared["spread_runs"].max()) if len(shared) else 0
    spread_words = f"median and range of {runs} runs" if runs > 1 else "one run"
    shared_ax.set_title(f"one context shared by every example: {spread_words}\n"
                        "(shared contexts × attention draws); dashed: min(T, H(n−1)+1)",
                        fontsize=9)  # fmt: skip
    shared_ax.set_ylabel("rank(Z)")
    own_ax.set_title("every example with its own context (one draw):\nshort of the ceiling",
                     fontsize=9)  # fmt: skip
    own_ax.set_ylabel("min(T, H·d) − rank(Z)")
    own_ax.yaxis.get_major_locator().set_params(integer=True)
    for ax in (shared_ax, own_ax):
        ax.set_xlabel("heads H")
    handles = [Line2D([], [], color=colors[m], linewidth=2) for m in models]
    handles += [
        Line2D([], [], color="0.3", marker=markers[la], linestyle="", **MARKER) for la in layers
    ]
    handles += [
        Line2D([], [], color="0.3", marker="o", linestyle="", **MARKER),
        Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="", **MARKER),
    ]
    labels = models + [f"layer {la}" for la in layers] + ["resolved", "not one number"]
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7, frameon=False)
    return fig


def _line(ax: plt.Axes, H_values: pd.Series, values: pd.Series, resolved: pd.Series,
          style: dict) -> None:  # fmt: skip
    """One model × layer: a line, filled markers where resolved, open ones elsewhere."""
    ax.plot(H_values, values, color=style["color"], linewidth=1.2, alpha=0.8)
    mask = resolved.fillna(False).astype(bool).to_numpy()
    x, y = np.asarray(H_values), np.asarray(values)
    ax.plot(x[mask], y[mask], linestyle="", **MARKER, **style)
    ax.plot(x[~mask], y[~mask], linestyle="", markerfacecolor="none", **MARKER, **style)


def _bounds(ax: plt.Axes, shared: pd.DataFrame) -> None:
    """min(T, H(n−1)+1) for every context size and T, dashed and labelled at the right end."""
    for (n, t), group in shared.groupby(["n", "T"]):
        H_values = np.sort(group["H"].unique())
        top = np.minimum(t, H_values * (n - 1) + 1)
        ax.plot(H_values, top, "k--", linewidth=0.8)
        ax.annotate(f"n = {n}, T = {t}", (H_values[-1], top[-1]), fontsize=6, xytext=(-2, 3),
                    textcoords="offset points", ha="right")  # fmt: skip


def _first_runs(real: pd.DataFrame) -> pd.DataFrame:
    """The first shared context's first draw, as a spread of one run."""
    shared = real[real["contexts"] == "shared"]
    return shared.assign(spread_median=shared["certified"], spread_min=shared["certified"],
                         spread_max=shared["certified"], spread_runs=1,
                         spread_resolved=shared["resolved"].astype(int))  # fmt: skip
