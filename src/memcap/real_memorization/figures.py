"""One figure per model: what training memorized on the real embeddings and on the controls,
against H, beside Theorem 1's count and the certified rank of Z."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from memcap.plotting import legend_beside, set_theme
from memcap.synthetic.laws import decided_on
from memcap.theory import CONSTRUCTION, THEOREM, bound_kind

MARKERS = {"real": "o", "uniform": "s", "gaussian": "^"}
BOUND_LABELS = {THEOREM: "Theorem 1: H(n'−1)+1", CONSTRUCTION: "construction: H(d_h−1)+1"}


def plot_model(capacity: pd.DataFrame, model: str) -> plt.Figure:
    """One panel per layer, context and task of ``model``: every seed's capacity (the laws'
    notion; hollow where it is a lower bound) and the seed means, one colour per input; black
    dashed Theorem 1's H(n'−1)+1 (its construction's H(d_h−1)+1 where d_h < n'), grey dotted
    the certified rank of Z with random attention on the real examples (seed mean)."""
    set_theme()
    data = capacity[capacity["model"] == model]
    panels = list(data.groupby(["layer", "context", "task"], sort=True))
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.2 * len(panels), 4.0), squeeze=False, layout="constrained"
    )
    palette = dict(zip(MARKERS, sns.color_palette(n_colors=len(MARKERS)), strict=True))
    for ax, ((layer, context, task), panel) in zip(axes[0], panels, strict=True):
        values = decided_on(panel)
        for kind, rows in values.groupby("input", sort=False):
            colour = palette[kind]
            for lower, seeds in rows.groupby("lower_bound"):
                ax.scatter(
                    seeds["H"], seeds["capacity"], marker=MARKERS[kind], s=22, alpha=0.7,
                    facecolors="none" if lower else colour, edgecolors=colour,
                )  # fmt: skip
            means = rows.groupby("H")["capacity"].mean()
            ax.plot(means.index, means.values, color=colour, label=kind)
        n, d_h = int(panel["n"].iloc[0]), int(panel["d_h"].iloc[0])
        bound = panel.groupby("H")["bound"].first()
        ax.plot(bound.index, bound.values, "k--", label=BOUND_LABELS[bound_kind(n, d_h)])
        real = panel[panel["input"] == "real"]
        if len(real):
            rank = real.groupby("H")["certified"].mean()
            ax.plot(rank.index, rank.values, ":", color="grey", label="rank Z, random attention")
        ax.set(
            title=f"layer {layer}, {context} context, {task}",
            xlabel=f"heads H (n' = {n}, d_h = {d_h})",
            ylabel="examples memorized" if ax is axes[0][0] else None,
            xticks=sorted(panel["H"].unique()),
        )
    legend_beside(axes[0][-1])
    fig.suptitle(f"{model}: trained on its embeddings and on i.i.d. controls")
    return fig
