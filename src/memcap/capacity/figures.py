"""Figure of the capacity stage: certified capacity of real embeddings against H."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from memcap.plotting import set_theme


def plot_real_capacity(real: pd.DataFrame) -> plt.Figure:
    """Certified capacity on real embeddings against H, per model and layer.

    Left: every example's context shared (the first example's), against each context size's
    min(T, H(n−1)+1) — the configuration whose capacity depends on n. Right: every example with
    its own context, as a fraction of its ceiling min(T, H·d) (1: the sizes, not the data).
    """
    set_theme()
    fig, (shared_ax, own_ax) = plt.subplots(1, 2, figsize=(10.0, 4.4))
    real = real.assign(source=real["model"] + " / layer " + real["layer"].astype(str))
    contexts = real["contexts"] if "contexts" in real else pd.Series("own", index=real.index)
    shared = real[contexts == "shared"]
    if len(shared):
        sns.lineplot(data=shared, x="H", y="certified", hue="source", marker="o",
                     legend=False, ax=shared_ax)  # fmt: skip
        for (n, t), group in shared.groupby(["n", "T"]):
            heads = group["H"].drop_duplicates().sort_values()
            shared_ax.plot(heads, [min(t, h * (n - 1) + 1) for h in heads], "k--", linewidth=1)
            shared_ax.annotate(f"n = {n}", (heads.iloc[-1], min(t, heads.iloc[-1] * (n - 1) + 1)),
                               fontsize=7, xytext=(3, 0), textcoords="offset points")  # fmt: skip
    shared_ax.set_title("one context shared by every example", fontsize=10)
    shared_ax.set_xlabel("heads H")
    shared_ax.set_ylabel("certified capacity rank(Z)  (dashed: min(T, H(n−1)+1))")
    own = real[contexts == "own"].assign(
        fraction=lambda f: f["certified"] / f["ceiling"] if "ceiling" in f else f["certified"]
    )
    sns.lineplot(data=own, x="H", y="fraction", hue="source", marker="o", ax=own_ax)
    own_ax.set_title("every example with its own context", fontsize=10)
    own_ax.set_xlabel("heads H")
    own_ax.set_ylabel("certified / ceiling min(T, H·d)")
    own_ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig
