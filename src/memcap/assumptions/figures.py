"""Figures of the assumption checks: P(k) profile, context ranks, depth profile.

They use the shared theme of :mod:`memcap.plotting`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator

from memcap.plotting import legend_beside, set_theme


def plot_profile(table: pd.DataFrame, n: int, d: int, title: str) -> plt.Figure:
    """P(k) against k with its confidence band, n and d marked; where the table has them,
    P(k) a decade either side of the tolerance and by paper A's raw rule."""
    set_theme()
    fig, ax = plt.subplots(figsize=(8.4, 3.6), layout="constrained")
    ax.fill_between(table["k"], table["p_low"], table["p_high"], alpha=0.25, step="mid")
    ax.step(table["k"], table["p_full_rank"], where="mid", label="P(k)")
    others = (
        ("p_strict", "at 10·τ (applies where 1)", (0, (4, 2))),
        ("p_loose", "at τ/10 (does not apply where below 1)", (0, (1, 1))),
        ("p_paper_a", "paper A's rule (stored values)", "-."),
    )
    for column, label, style in others:
        if column in table:
            ax.step(
                table["k"], table[column], where="mid", linestyle=style, linewidth=1, label=label
            )
    kmax = int(table["k"].max()) if len(table) else 1
    for k, label, style in ((n, f"n = {n}", "--"), (d, f"d = {d}", ":")):
        if k <= kmax:
            ax.axvline(k, color="0.3", linestyle=style, linewidth=1, label=label)
    ax.set(xlabel="subset size k", ylabel="fraction independent", ylim=(-0.03, 1.03))
    ax.set_title(title)
    legend_beside(ax, fontsize=8)
    return fig


def plot_context_ranks(table: pd.DataFrame, n: int, title: str) -> plt.Figure:
    """Histogram of context ranks (n marked) and of their margins above the measured error's
    zero line (the decision; above the tolerance τ when the table has no error margins)."""
    set_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.4, 3.4), layout="constrained")
    values, counts = np.unique(table["rank"].to_numpy(), return_counts=True)
    left.bar(values, counts, width=0.8)
    left.axvline(n, color="0.3", linestyle="--", linewidth=1, label=f"n = {n}")
    low, high = min(values.min(initial=n), n), max(values.max(initial=n), n)
    left.set(xlabel="numerical rank of E_t", ylabel="contexts", xlim=(low - 3, high + 3))
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_beside(left, fontsize=8)
    measured = "error_margin_decades" in table
    column = "error_margin_decades" if measured else "margin_decades"
    margins = table[column].replace(-np.inf, np.nan).dropna()
    right.hist(margins, bins=30)
    line, close = ("zero line", (0, 1)) if measured else ("tolerance", (-1, 1))
    right.axvline(0, color="0.3", linestyle="--", linewidth=1, label=line)
    right.axvspan(*close, color="C1", alpha=0.12, label="too close to call")
    xlabel = "log10(σ_min/σ_max ÷ zero line)" if measured else "log10(σ_min / tolerance)"
    right.set(xlabel=xlabel, ylabel="contexts")
    legend_beside(right, fontsize=8)
    fig.suptitle(title)
    return fig


def plot_depth(table: pd.DataFrame, title: str) -> plt.Figure:
    """The numbered layers against depth: P(n) and context full rank; Kruskal rank, n and d."""
    set_theme()
    rows = table[table["layer"].astype(str).str.isdigit()].copy()
    rows["x"] = rows["layer"].astype(int)
    rows = rows.sort_values("x")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.8, 5.6), sharex=True, layout="constrained")
    top.plot(rows["x"], rows["p_n"], marker="o", label="P(n): independent n-subsets")
    top.plot(
        rows["x"],
        rows["context_full_rank_fraction"],
        marker="s",
        linestyle="--",
        label="contexts of rank n",
    )
    applies = rows[rows["theorem1_applies"].astype(bool)]
    top.scatter(applies["x"], [1.06] * len(applies), marker="v", color="C2", label="Theorem 1")
    top.set(ylabel="fraction", ylim=(-0.05, 1.12))
    legend_beside(top, fontsize=8)
    top.set_title(title)
    estimate = rows["kruskal_estimate"].astype(float)
    lower = rows["kruskal_lower"].astype(float).fillna(estimate)
    upper = rows["kruskal_upper"].astype(float).fillna(estimate)
    bottom.fill_between(rows["x"], lower, upper, alpha=0.25, label="certified bounds")
    bottom.plot(rows["x"], estimate, marker="o", label="Kruskal rank estimate at τ")
    if len(rows):
        n, d = int(rows["n"].iloc[0]), int(rows["d"].iloc[0])
        bottom.axhline(n, color="0.3", linestyle="--", linewidth=1, label=f"n = {n}")
        bottom.axhline(d, color="0.3", linestyle=":", linewidth=1, label=f"d = {d}")
    bottom.set(xlabel="layer (0 = embeddings, k = output of block k)", ylabel="Kruskal rank")
    bottom.xaxis.get_major_locator().set_params(integer=True)
    legend_beside(bottom, fontsize=8)
    return fig
