"""Figures the report draws itself, from stage tables, when no stage figure shows the same thing."""

from __future__ import annotations

import io
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcap.plotting import save_figure, set_theme


def figure_png(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes (closes it)."""
    buffer = io.BytesIO()
    save_figure(fig, buffer)
    return buffer.getvalue()


def certified_capacity_plot(
    capacity: pd.DataFrame, n: int, n_applicable: int | None, label: str
) -> bytes:
    """Certified capacity of real embeddings vs H, with Theorem 1's H(n−1)+1 line(s).

    Args:
        capacity: rows with columns ``H`` and ``certified`` (one model × layer).
        n: the layer's context size.
        n_applicable: the context size at which the verdicts let Theorem 1 apply, or None.
        label: model · layer, for the title.
    """
    set_theme()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    frame = capacity.sort_values("H")
    ax.plot(frame["H"], frame["certified"], "o-", label="certified (rank of Z)")
    heads = np.linspace(frame["H"].min(), frame["H"].max(), 50)
    ax.plot(heads, heads * (n - 1) + 1, "--", color="0.4", label=f"H(n−1)+1, n = {n}")
    if n_applicable is not None and n_applicable != n:
        ax.plot(heads, heads * (n_applicable - 1) + 1, ":", label=f"H(k−1)+1, k = {n_applicable}")
    if "T" in frame:
        ax.axhline(frame["T"].max(), color="0.7", lw=1, label="T (examples available)")
    ax.set(xlabel="heads H", ylabel="examples", title=label)
    ax.legend(fontsize=8)
    return figure_png(fig)


def profile_plot(profile: Mapping[int, float], n: int, d: int, label: str) -> bytes:
    """P(k), the fraction of independent random k-subsets of queries, with n and d marked."""
    set_theme()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ks = sorted(profile)
    ax.plot(ks, [profile[k] for k in ks], "o-", ms=4)
    ax.axvline(n, ls="--", color="C1", label=f"n = {n}")
    ax.axvline(d, ls=":", color="C2", label=f"d = {d}")
    ax.set(xlabel="subset size k", ylabel="P(k independent)", ylim=(-0.05, 1.05), title=label)
    ax.legend(fontsize=8)
    return figure_png(fig)
