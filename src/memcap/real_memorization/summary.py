"""What training memorized on the real embeddings, beside the controls and Theorem 1.

Per model, layer and input, the seeds' capacities are read as the synthetic stage reads them
(:func:`memcap.synthetic.summary.estimate_table`), and "linear in H" is decided on them as the
synthetic laws are (:func:`memcap.synthetic.laws.law_table`, with its power). Real and each
control are compared at every H by a paired test on the seeds (same labels, initialisations
and batches): each seed's relative change real / control − 1, a lower bound on either side
making it interval-censored (:func:`memcap.laws.censored.change_intervals`), and the mean
change tested against 0, two-sided, by the censored likelihood ratio
(:func:`memcap.laws.censored.one_sample`), Holm-adjusted over the table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memcap.laws import censored, holm
from memcap.synthetic.laws import decided_on, law_table, notion
from memcap.synthetic.summary import estimate_table

LAYER = ["model", "layer", "input"]
CURVE = ["model", "layer", "context", "task", "H"]
PAIRED_COLUMNS = [
    *CURVE, "control", "notion", "seeds", "exact", "real_mean", "control_mean", "change",
    "p_value", "p_holm", "outcome",
]  # fmt: skip
ALPHA = 0.05


def _per_layer(capacity: pd.DataFrame, table) -> pd.DataFrame:
    frames = [
        table(group).assign(**dict(zip(LAYER, key, strict=True)))
        for key, group in capacity.groupby(LAYER, sort=False)
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def estimates(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per model, layer, input, context, task and H: the synthetic stage's estimate
    columns (seed mean ± SE, "≥" where a seed is a lower bound, fitted_T's seeds)."""
    return _per_layer(capacity, estimate_table)


def laws(capacity: pd.DataFrame) -> pd.DataFrame:
    """ "Linear in H" per model, layer, input, context and task: the synthetic laws' columns
    (test, p-value, power, the notion that decides it)."""
    return _per_layer(capacity, law_table)


def paired(capacity: pd.DataFrame) -> pd.DataFrame:
    """Real against every control at each H, paired by seed (:data:`PAIRED_COLUMNS`)."""
    rows = []
    for key, group in capacity.groupby(CURVE, sort=True):
        inputs = dict(tuple(decided_on(group).groupby("input")))
        deciding = notion(group)
        if "real" not in inputs:
            continue
        real = inputs["real"].set_index("seed")
        for control in (c for c in inputs if c != "real"):
            other = inputs[control].set_index("seed")
            seeds = real.index.intersection(other.index)
            low, high, keep = censored.change_intervals(
                other.loc[seeds, "capacity"],
                real.loc[seeds, "capacity"],
                other.loc[seeds, "lower_bound"],
                real.loc[seeds, "lower_bound"],
            )
            rows.append(
                {
                    **dict(zip(CURVE, key, strict=True)),
                    "control": control,
                    "notion": deciding,
                    "seeds": int(keep.sum()),
                    "exact": int(np.sum(low == high)),
                    "real_mean": float(real.loc[seeds, "capacity"].mean()),
                    "control_mean": float(other.loc[seeds, "capacity"].mean()),
                    **_two_sided(low, high),
                }
            )
    table = pd.DataFrame(rows, columns=PAIRED_COLUMNS[:-2])
    table["p_holm"] = holm(table["p_value"]) if len(table) else []
    table["outcome"] = np.where(
        table["p_holm"] < ALPHA,
        np.where(table["change"] > 0, "real above", "real below"),
        "no difference shown",
    )
    return table[PAIRED_COLUMNS]


def _two_sided(low: np.ndarray, high: np.ndarray) -> dict[str, float]:
    """The mean relative change and its two-sided p (twice the smaller one-sided p)."""
    _, p_greater, p_less, mean, _ = censored.both_sides(low, high, 0.0)
    return {"change": mean, "p_value": float(min(1.0, 2.0 * min(p_greater, p_less)))}
