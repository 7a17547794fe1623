"""A scaling section's caveats and training notes, read from its stage's tables: the
convergence decisions (estimates.csv), the per-seed flags (capacity.csv: unbracketed,
censored, fitted_T not measured, at chance, falls along T, under-trained), the trained counts
against the bound, and the recipes the sweeps applied (summary.csv). Each caveat is counted
in its unit: seeds (a row of capacity.csv) or settings."""

from __future__ import annotations

import pandas as pd

from memcap.report.context import ScalingSection, Table
from memcap.synthetic.series import RISE
from memcap.synthetic.summary import bound_ratios


def convergence_notes(estimates: pd.DataFrame) -> list[str]:
    """What the convergence check found: every seed's gain, decided per setting."""
    if "convergence" not in estimates or (estimates["convergence"] == "not checked").all():
        return []
    counts = estimates["convergence"].value_counts()
    gains = estimates["gain_mean"].dropna()
    limited = estimates[estimates["convergence"] == "optimiser-limited"]
    text = (
        "Convergence check, every seed of every setting: each series trained again with the "
        "longer budget (synthetic.convergence.factor × the recipe's) from its capacity T up "
        "the ladder. A setting is optimiser-limited when the 90% t-interval of its seeds' mean "
        "relative gain lies above the margin (synthetic.convergence.gain), not limited when it "
        f"lies below, else undetermined. Mean gains {gains.min():+.1%} to {gains.max():+.1%}; "
        + ", ".join(
            f"{count} of {len(estimates)} settings {name}"
            + (f" ({', '.join(_named_settings(limited))})" if name == "optimiser-limited" else "")
            for name, count in counts.items()
        )
    )
    return [
        text + ". Every seed's capacity counts both budgets: it is what this recipe memorized, "
        "a lower bound on the layer's capacity, and more so where the setting is "
        "optimiser-limited."
    ]


def capacity_notes(stage: str, capacity: pd.DataFrame, section: ScalingSection) -> None:
    """The per-seed table's caveats (each row of capacity.csv is one seed of one setting) into
    the section's limitations, and what Theorem 1's bound means into its notes."""
    seeds = f"{len(capacity)} seeds"
    if "bracketed" in capacity and not capacity["bracketed"].astype(bool).all():
        open_ = capacity[~capacity["bracketed"].astype(bool)]
        share = (open_["capacity"] / open_["T_max"]).agg(["min", "max"])
        section.limitations.append(
            f"{len(open_)} of {seeds} memorize their most at the largest T they tried "
            f"({share['min']:.0%}–{share['max']:.0%} of it): their maximum is not bracketed by "
            f"a larger T that memorized no more (or at most {RISE:.0%} more above chance, "
            "where the ladder goes past the maximum): shown as ≥, and taken by the laws as "
            "right-censored (a lower bound), never as a value."
        )
    if "censored" in capacity and capacity["censored"].astype(bool).any():
        censored = capacity[capacity["censored"].astype(bool)]
        section.limitations.append(
            f"{len(censored)} of {seeds} memorized their largest T at or above the ladder's "
            "level: their capacity is a lower bound, which the laws take as right-censored "
            "(raise synthetic.ladder.max_T or the sweep's T to measure it)."
        )
    if "fitted_censored" in capacity and capacity.get("bracket", pd.Series()).notna().any():
        open_fit = capacity[capacity["fitted_censored"].astype(bool)]
        if len(open_fit):
            section.limitations.append(
                f"{len(open_fit)} of {seeds} have a fitted_T not measured (no fitted and "
                "unfitted T within 1.25× of each other): a lower bound, which the laws take as "
                f"right-censored: {', '.join(sorted(set(_named_settings(open_fit))))}."
            )
        else:
            section.recipes.append(
                f"Every one of {seeds} has its fitted_T measured: a fitted T and an unfitted T "
                "at most 1.25× apart (the laws take the geometric midpoint)."
            )
    if "at_chance" in capacity and capacity["at_chance"].astype(bool).any():
        chance = capacity[capacity["at_chance"].astype(bool)]
        section.limitations.append(
            f"{len(chance)} of {seeds} memorize no more than a constant output would (at or "
            "below the upper 95% quantile of its count at their T): shown as chance, not as a "
            "capacity, and the laws leave their settings out: "
            f"{', '.join(sorted(set(_named_settings(chance))))}."
        )
    if stage == "synthetic" and {"bound", "task"} <= set(capacity.columns):
        ratios = bound_ratios(capacity).round(2)
        section.tables["Trained counts against the bound (best seeds)"] = Table.from_frame(ratios)
        section.notes.append(_bound_note(ratios))
    if "largest_drop" in capacity:
        _falls(capacity, section, seeds)
    if "under_trained" in capacity and capacity["under_trained"].astype(bool).any():
        flagged = capacity[capacity["under_trained"].astype(bool)]
        section.limitations.append(
            f"{len(flagged)} of {seeds} are under-trained (not fitted, training loss still "
            f"falling at the end of their last budget), in the settings "
            f"{', '.join(_settings(flagged))}."
        )


def _bound_note(ratios: pd.DataFrame) -> str:
    """What Theorem 1's H(n−1)+1 predicts for each task and what the trained counts show."""
    where = "; ".join(
        f"{r.sweep} {r.task} {r.context}: {r.ratio_min:g}–{r.ratio_max:g}× (median "
        f"{r.ratio_median:g}×)"
        for r in ratios.itertuples()
    )
    regression = (
        " Regression counts an example within the tolerance (synthetic.train.regression_tol), "
        "so a constant output already catches about twice the tolerance's share of uniform "
        "targets."
        if (ratios["task"] == "regression").any()
        else ""
    )
    return (
        "The bound is H(n−1)+1 where d_h ≥ n and, below, the construction's H(d_h−1)+1 "
        "(Theorem 1 gives only the order Ω(H·d_h) there; bound_kind in capacity.csv). "
        "H(n−1)+1 is what Theorem 1's construction memorizes with its attention weights fixed; "
        "with a shared context it is also the most a readout of fixed head outputs can fit "
        "for generic regression targets (the head outputs span at most H(n−1)+1 directions), "
        "while classification needs only the right argmax. Trained attention moves the head "
        "outputs with the examples, so neither limit binds a trained layer; the best seeds "
        f"memorize, per bound: {where}.{regression}"
    )


def _falls(capacity: pd.DataFrame, section: ScalingSection, seeds: str) -> None:
    """Seeds memorizing more than 10% fewer at a larger T: inside their grid (the optimiser's:
    the datasets are nested), a limitation; only at their largest T (where the ladder past the
    maximum stops, bracketing the count), a note on the recipe."""
    drops = capacity[capacity["largest_drop"] > 0.10]
    inside = drops[drops.get("drop_inside", drops["largest_drop"]) > 0.10]
    at_top = len(drops) - len(inside)
    if at_top:
        section.recipes.append(
            f"{at_top} of {seeds} memorize more than 10% fewer examples at their largest T than "
            "at a smaller one, and nowhere else: the ladder past the maximum stops at the first "
            "T that memorizes no more, and that fall brackets the count."
        )
    (section.limitations if len(inside) else section.recipes).append(
        f"{len(inside)} of {seeds} memorize more than 10% fewer examples at a larger T inside "
        "their grid (below the largest T they tried) than at a smaller one: the datasets are "
        "nested, so the fall is the optimiser's"
        + (f": {', '.join(_settings(inside))}." if len(inside) else ".")
    )


def _settings(rows: pd.DataFrame) -> list[str]:
    """The distinct swept settings of ``rows``, named "sweep swept=value", sorted."""
    return sorted({f"{r.sweep} {r.swept}={r.value}" for r in rows.itertuples()})


def _named_settings(rows: pd.DataFrame) -> list[str]:
    """Each row's setting, "sweep swept=value" with its context and task where it has them."""
    extra = [c for c in ("context", "task") if c in rows]
    return [
        " ".join([f"{r['sweep']} {r['swept']}={r['value']}", *(str(r[c]) for c in extra)])
        for _, r in rows.iterrows()
    ]


def extra_budgets(summary: pd.DataFrame) -> list[str]:
    """A note on the replicas that trained beyond one budget (``train.extra_budgets``)."""
    if not {"steps_run", "steps"} <= set(summary.columns):
        return []
    longer = summary[summary["steps_run"] > summary["steps"]]
    if longer.empty:
        return []
    return [
        f"{len(longer)} of {len(summary)} trainings (one setting, seed and T each) were still "
        "learning when their step budget ended and trained further budgets (up to "
        f"{int(longer['steps_run'].max()):,} steps): "
        f"{', '.join(_settings(longer))}."
    ]


def restarts(summary: pd.DataFrame) -> list[str]:
    """A note on the replicas whose kept training is a restart (``ladder.restarts``)."""
    if "restarts" not in summary or not (summary["restarts"] > 0).any():
        return []
    again = summary[summary["restarts"] > 0]
    return [
        f"{len(again)} of {len(summary)} trainings (one setting, seed and T each) fell more "
        "than 10% below their seed's count at a smaller T and keep a retraining from a fresh "
        "initialisation: "
        f"{', '.join(_settings(again))}."
    ]


def aot_recipes(summary: pd.DataFrame) -> list[str]:
    """One note per AoT sweep: the training recipe, model variant and metric of its curves."""
    if not {"recipe", "variant", "metric"} <= set(summary.columns):
        return []
    notes = []
    metrics = {"last_batches": "mean of the last training batches", "all_inputs": "on all inputs"}
    for sweep, rows in summary.groupby("sweep", sort=False):
        first = rows.iloc[0]
        notes.append(
            f"{sweep}: {first['recipe']} recipe, {first['variant']} model variant, accuracy "
            f"{metrics.get(first['metric'], first['metric'])}."
        )
    return notes
