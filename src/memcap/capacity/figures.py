"""Figure of the capacity stage: certified capacity of real embeddings against H."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from memcap.plotting import set_theme

# Marker legend: only a point below its ceiling says something about the embeddings.
AT_CEILING = "at ceiling min(T, H·d): the sizes"
BELOW_CEILING = "below ceiling: measured"


def plot_real_capacity(real: pd.DataFrame) -> plt.Figure:
    """Certified capacity on real embeddings against H, per model and layer, with H(n−1)+1.

    Points at their ceiling min(T, H·d) and points below it get different markers.
    """
    set_theme()
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    real = real.assign(
        source=real["model"] + " / layer " + real["layer"].astype(str),
        rank=real["at_ceiling"].astype(bool).map({True: AT_CEILING, False: BELOW_CEILING}),
    )
    sns.lineplot(data=real, x="H", y="certified", hue="source", legend=False, ax=ax)
    sns.scatterplot(
        data=real,
        x="H",
        y="certified",
        hue="source",
        style="rank",
        style_order=[AT_CEILING, BELOW_CEILING],
        markers={AT_CEILING: "o", BELOW_CEILING: "X"},
        s=60,
        ax=ax,
    )
    bound = real.dropna(subset=["bound"]).groupby("H")["bound"].agg(["min", "max"])
    if len(bound):
        ax.fill_between(
            bound.index,
            bound["min"],
            bound["max"],
            color="black",
            alpha=0.1,
            label="theory H(n−1)+1 (range over models)",
        )
    examples = real.groupby("H")["T"].max()
    ax.plot(examples.index, examples.values, "k:", linewidth=1, label="examples T")
    ax.set_xlabel("heads H")
    ax.set_ylabel("certified capacity rank(Z)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
