"""One figure per AoT sweep: accuracy with chance, both lower bounds and the law decided on it.

The distribution task adds a second row: mean cross-entropy and KL(π ‖ model) against the
entropy floor (the cross-entropy of a model that outputs π exactly).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from memcap.aot.laws import CEILING, FORM_LAWS, form_test, law_table
from memcap.aot.summary import facet_groups, fit_curve, seed_means
from memcap.plotting import legend_beside, set_theme

X_LABELS = {
    "H": "heads H",
    "d_h": "head dimension $d_h$",
    "d": "embedding dimension d",
    "params": "parameters",
    "N": "dictionary size N",
    "S": "input length S",
}
FIXED = ("N", "S", "d", "d_h", "H")
FORM_AXES = ("H", "d_h", "d")


def plot_sweep(rows: pd.DataFrame) -> plt.Figure:
    """Accuracy against the sweep's x axis, one panel per facet value: every seed, the seed
    means, the overlays, each AoT form law's fit with its 95% band (censored points hollow)
    and the outcomes of the panel's laws (:mod:`memcap.aot.laws`) in its title."""
    set_theme()
    x = rows["x_axis"].iloc[0]
    curves = list(facet_groups(rows))
    laws = law_table(rows)
    panels = list(dict.fromkeys(label for _, label, _ in curves))
    distribution = (rows["task"] == "distribution").any()
    n_rows = 2 if distribution else 1
    fig, axes = plt.subplots(
        n_rows, len(panels), figsize=(7.4 * len(panels), 4.2 * n_rows), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    palette = dict(zip(rows["model"].unique(), sns.color_palette(), strict=False))
    for col, panel in enumerate(panels):
        ax = axes[0, col]
        panel_curves = [(m, sub) for m, label, sub in curves if label == panel]
        _overlays(ax, pd.concat([sub for _, sub in panel_curves]), x)
        for model, sub in panel_curves:
            _accuracy_curve(ax, sub, x, model, palette[model])
        ax.set(
            xlabel=X_LABELS.get(x, x),
            ylabel="accuracy" if not distribution else "top-1 agreement with π",
            ylim=(0, 1.05),
        )
        ax.set_title(_title(rows, panel) + _outcomes(laws, panel), fontsize=9)
        legend_beside(ax, fontsize=7)
        if distribution:
            _divergence_panel(axes[1, col], pd.concat([s for _, s in panel_curves]), x, palette)
    return fig


def _accuracy_curve(ax: plt.Axes, rows: pd.DataFrame, x: str, model: str, color) -> None:
    """Every seed (hollow: censored at the ceiling), the seed means, and for an AoT curve with
    a form law its fit over the uncensored points with the 95% band (else the drawn fit)."""
    means = seed_means(rows, x)
    censored = rows[x].isin(means.loc[means["accuracy"] >= CEILING, x])
    ax.scatter(
        rows.loc[~censored, x], rows.loc[~censored, "accuracy"], color=color, alpha=0.35, s=14
    )
    if censored.any():
        ax.scatter(rows.loc[censored, x], rows.loc[censored, "accuracy"], facecolors="none",
                   edgecolors=color, s=18, label=f"censored (mean ≥ {CEILING})")  # fmt: skip
    ax.plot(means[x], means["accuracy"], "o-", color=color, label=f"{model} (mean of seeds)")
    law = form_test(rows) if model == "aot" and x in FORM_AXES else None
    if law is not None and law.coefficients:
        kept = means.loc[means["accuracy"] < CEILING, x]
        grid = np.linspace(kept.min(), kept.max(), 200)
        mean, low, high = law.band(grid)
        ax.plot(grid, mean, "--", color=color, label=f"{law.form} fit (seeds below {CEILING})")
        ax.fill_between(grid, low, high, color=color, alpha=0.2, label="95% band")
        return
    result = fit_curve(rows, x)
    if result is not None:
        grid = np.linspace(means[x].min(), means[x].max(), 200)
        ax.plot(
            grid,
            np.minimum(1.0, result.predict(grid)),
            "--",
            color=color,
            label=f"fit: {result.describe(x)}",
        )


def _outcomes(laws: pd.DataFrame, panel: str) -> str:
    """The panel's form and comparison outcomes with their p-values, one line."""
    shown = laws[
        laws["law"].isin([*FORM_LAWS.values(), "AoT and MLP-Transformer alike per parameter"])
        & laws["curve"].isin([f"aot, {panel}" if panel else "aot", panel or "all"])
    ]
    parts = [
        f"{r.law}: {r.comparison or r.outcome}"
        + ("" if pd.isna(r.p_value) else f" (p = {r.p_value:.2g})")
        for r in shown.itertuples()
    ]
    return ("\n" + "; ".join(parts)) if parts else ""


def _overlays(ax: plt.Axes, rows: pd.DataFrame, x: str) -> None:
    """Chance and both lower bounds, for the AoT rows when there are any."""
    aot = rows[rows["model"] == "aot"]
    means = seed_means(aot if len(aot) else rows, x)
    ax.plot(means[x], means["chance"], ":", color="black", label="chance 1/N")
    ax.plot(means[x], means["bound_ours"], "-", color="grey", lw=2.2, label="our lower bound")
    ax.plot(means[x], means["bound_previous"], "-.", color="grey", label="previous lower bound")


def _divergence_panel(ax: plt.Axes, rows: pd.DataFrame, x: str, palette: dict) -> None:
    for model, sub in rows.groupby("model", sort=False):
        means = sub.groupby(x, as_index=False)[["kl", "cross_entropy", "entropy"]].mean()
        ax.plot(
            means[x],
            means["cross_entropy"],
            "o-",
            color=palette[model],
            label=f"{model}: cross-entropy",
        )
        ax.plot(means[x], means["kl"], "s--", color=palette[model], label=f"{model}: KL(π ‖ model)")
    floor = rows.groupby(x, as_index=False)["entropy"].mean()
    ax.plot(floor[x], floor["entropy"], ":", color="black", label="entropy floor H(π)")
    ax.set(xlabel=X_LABELS.get(x, x), ylabel="nats", ylim=(0, None))
    legend_beside(ax, fontsize=7)


def _title(rows: pd.DataFrame, panel: str) -> str:
    fixed = [f"{k}={rows[k].iloc[0]}" for k in FIXED if rows[k].nunique() == 1]
    parts = [rows["sweep"].iloc[0], panel, ", ".join(fixed)]
    return " · ".join(p for p in parts if p) + "\n" + provenance_label(rows)


def provenance_label(rows: pd.DataFrame) -> str:
    """Which recipe, model variant and accuracy metric a sweep's curves come from."""
    recipe = {"authors": "authors' recipe", "ours": "our recipe"}[rows["recipe"].iloc[0]]
    variant = {"code": "authors'-code AoT", "paper": "paper-text AoT"}[rows["variant"].iloc[0]]
    metric = {"last_batches": "last-batch accuracy", "all_inputs": "accuracy on all inputs"}
    return f"{recipe}, {variant}, {metric[rows['metric'].iloc[0]]}"
