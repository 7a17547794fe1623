"""Paper A's scaling laws decided on this run's seed-level capacities, one row per curve.

Theorem 1 with its construction predicts capacity linear in H, growing with the context size
n, and growing with the head dimension d_h up to d_h = n with no gain beyond it. Each curve
(sweep, context kind, task) is decided by :mod:`memcap.laws`, the seeds of a setting being
its replicates, on every seed's ``fitted_T`` (the largest T fitted exactly: the theorem's
notion) where the run bisected it, the geometric midpoint of its bracket standing for it
(:func:`notion`, :func:`decided_on`); else on its ``capacity`` (the most examples memorized
over its T grid: paper A's plotted notion). Both are lower bounds on the layer's capacity;
``notion`` in the table says which decides, and the other is shown beside it:

- ``linear in H``: lack-of-fit F-test of the line against the per-H means (p ≥ 0.05 holds,
  p < 0.01 fails, between inconclusive) and the slope's 95% interval above zero, weighted by
  1 / mean² because the seeds' standard deviation grows in proportion to the mean
  (:func:`spread_exponent` measures it on the run); the unweighted test beside it
  (``p_unweighted``), not deciding;
- ``grows with n``: Jonckheere–Terpstra trend test (a permutation p-value below 0.05 holds,
  a significant decrease fails);
- ``grows with d_h up to n``: the trend over d_h ≤ n and the paired step into d_h = n
  significantly positive; where growth stops (the largest d_h whose step is significantly
  positive) is set against n;
- ``saturates in d_h beyond n``: every d_h > n no more than 10% above d_h = n, paired by seed
  (one-sided non-superiority t-tests; a gain significantly above 10% fails, Bonferroni over
  the values).

A seed whose value is only a lower bound (``lower_bound``: its most-memorized count not
bracketed by a larger T, or its fitted_T not bracketed within 1.25×) enters every test as
right-censored (:mod:`memcap.laws.censored`: the censored normal likelihood for the forms and
the paired steps, Gehan's scores for the trend), never as a point value; the table counts
them. Settings with a seed at chance (``at_chance``: no more than a constant output counts)
are left out of the tests and named. Each table carries Holm-adjusted p-values
(``p_holm``) over its laws and, beside an inconclusive test, its power and the seeds 80% power
would need. The estimate of a setting is its seed mean ± standard error (:func:`estimates`);
the best seed is reported beside it, not tested.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from memcap import laws as law_tests
from memcap.laws import LawTest
from memcap.synthetic.settings import SWEPT

COLUMNS = [
    "law", "sweep", "curve", "notion", "criterion", "measured", "outcome", "holds",
    "test", "statistic", "p_value", "p_floor", "p_holm", "p_unweighted",
    "power", "seeds_needed", "power_at",
]  # fmt: skip
# Per sweep: (law, law of memcap.laws, the part of the curve it is decided on).
LAWS = {
    "heads": [("linear in H", "linear", "all")],
    "context_size": [("grows with n", "grows", "all")],
    "head_dim": [
        ("grows with d_h up to n", "grows to", "up to n"),
        ("saturates in d_h beyond n", "saturates", "from n"),
    ],
}
NOTIONS = {
    "fitted_T": (
        "on each seed's fitted_T (the largest T fitted exactly: the theorem's notion), the "
        "geometric midpoint of its bracket (a fitted and an unfitted T at most 1.25× apart); "
        "a seed not so bracketed enters as right-censored at its fitted end"
    ),
    "capacity": (
        "on each seed's capacity (the most examples memorized over its T grid: paper A's "
        "plotted notion); a seed no larger T bracketed enters as right-censored"
    ),
}
FITTED = {
    "capacity": "fitted_T_mid",
    "censored": "fitted_censored",
    "at_chance": "fitted_at_chance",
}


def notion(capacity: pd.DataFrame) -> str:
    """The notion the laws are decided on: ``fitted_T`` where the run bisected it (its
    ``bracket``), else the most-memorized ``capacity`` (fitted_T bracketed only by the grid)."""
    bisected = "bracket" in capacity and capacity["bracket"].notna().any()
    return "fitted_T" if bisected and set(FITTED) <= set(capacity) else "capacity"


def decided_on(capacity: pd.DataFrame) -> pd.DataFrame:
    """``capacity`` with the deciding notion's value, whether it is only a lower bound and
    chance in ``capacity``, ``lower_bound`` and ``at_chance`` (the most-memorized count kept
    as ``most_memorized``). A most-memorized count is a lower bound where no larger T
    bracketed it (``bracketed`` false, which every ``censored`` seed is); a censored fitted_T
    stands at its bracket's fitted end, a lower bound."""
    table = capacity.assign(most_memorized=capacity["capacity"])
    if notion(capacity) == "capacity":
        open_ = ~capacity.get("bracketed", pd.Series(True, index=capacity.index)).astype(bool)
        censored = capacity.get("censored", pd.Series(False, index=capacity.index)).astype(bool)
        return table.assign(lower_bound=open_ | censored)
    value = capacity["fitted_T_mid"].where(~capacity["fitted_censored"].astype(bool))
    return table.assign(
        capacity=value.fillna(capacity["fitted_T_low"]).astype(float),
        lower_bound=capacity["fitted_censored"].astype(bool),
        at_chance=capacity["fitted_at_chance"].astype(bool),
    )


A = law_tests.ALPHA
CRITERIA = {
    "linear": (
        f"lack-of-fit F-test of the line against the per-{{x}} seed means, weighted by "
        f"1/mean² ({{spread}}): p ≥ {law_tests.HOLD_P} holds, p < {law_tests.FAIL_P} fails; "
        "slope's 95% interval above 0; the unweighted test beside it, not deciding"
    ),
    "grows": (
        f"Jonckheere–Terpstra trend over the seeds: p < {A} holds, a decrease at p < {A} fails"
    ),
    "grows to": (
        f"Jonckheere–Terpstra trend over {{x}} ≤ n (p < {A}) and the step into {{x}} = n, "
        f"paired by seed, significantly positive (one-sided t, p < {A}): both hold; a "
        "significant decrease of either fails; growth stops at the largest {x} whose step is "
        "significantly positive"
    ),
    "saturates": (
        f"one-sided non-superiority t-test of each {{x}} > n against {{x}} = n, paired by seed: "
        f"every gain's 95% upper bound below +{law_tests.MARGIN:.0%} holds, a gain "
        f"significantly above +{law_tests.MARGIN:.0%} (Bonferroni over the {{x}}) fails"
    ),
}


def estimates(group: pd.DataFrame, y: str = "capacity") -> pd.DataFrame:
    """Seed mean, standard error, standard deviation, seed count, best seed and the seeds'
    values of ``y`` on one curve, by swept value, and how many seeds' values are lower bounds
    (``lower_bounds``; the mean is then a lower bound too)."""
    by_value = group.groupby("value")
    stats = by_value[y].agg(["mean", "sem", "std", "count", "max"]).sort_index()
    stats = stats.rename(columns={"max": "best", "sem": "se"}).fillna({"se": 0.0, "std": 0.0})
    stats["seeds"] = by_value[y].agg(lambda c: " ".join(f"{v:g}" for v in c))
    lower = group.get("lower_bound", pd.Series(False, index=group.index)).astype(bool)
    stats["lower_bounds"] = lower.groupby(group["value"]).sum().reindex(stats.index)
    return stats


def spread_exponent(capacity: pd.DataFrame) -> tuple[float, float, float, int]:
    """b of SD ∝ mean^b over the settings (seeds' SD against seed mean, log-log least squares),
    its 95% interval and the number of settings: b = 1 is a spread proportional to the mean
    (the 1 / mean² weights), b = 0 a constant spread (no weights)."""
    keys = ["sweep", "context", "task", "value"]
    spread = capacity.groupby(keys)["capacity"].agg(["mean", "std", "count"])
    spread = spread[(spread["count"] >= 2) & (spread["std"] > 0) & (spread["mean"] > 0)]
    if len(spread) < 3 or spread["mean"].nunique() < 2:  # no spread of means to regress on
        return float("nan"), float("nan"), float("nan"), len(spread)
    fit = sps.linregress(np.log(spread["mean"]), np.log(spread["std"]))
    half = sps.t.ppf(0.975, len(spread) - 2) * fit.stderr
    return float(fit.slope), float(fit.slope - half), float(fit.slope + half), len(spread)


def curve_tests(capacity: pd.DataFrame) -> Iterator[tuple[dict, str, pd.DataFrame, LawTest]]:
    """Every law of every curve: (curve keys, law, the rows it is decided on, decision), the
    rows' ``capacity`` being the deciding notion's value (:func:`decided_on`)."""
    capacity = decided_on(capacity)
    for (sweep, context, task), group in capacity.groupby(["sweep", "context", "task"], sort=True):
        n = int(group["n"].iloc[0])
        keys = {"sweep": sweep, "context": context, "task": task, "n": n}
        for law, kind, part in LAWS.get(sweep, []):
            rows = _part(group, part, n)
            yield keys, law, rows, _decide(rows, kind, n, SWEPT[sweep])


def _part(group: pd.DataFrame, part: str, n: int) -> pd.DataFrame:
    if part == "up to n":
        return group[group["value"] <= n]
    if part == "from n":
        return group[group["value"] >= n]
    return group


def _decide(
    rows: pd.DataFrame, kind: str, n: int, swept: str, variance: str = "proportional"
) -> LawTest:
    rows, at_chance = _without_chance(rows)
    lower = "lower_bound" if "lower_bound" in rows else None
    common = {"lower_bounds": lower, "name": swept}
    if kind in ("saturates", "grows to"):
        law = "grows" if kind == "grows to" else kind
        result = law_tests.decide(rows, law, reference=n, **common)
    else:  # the seeds' spread grows with the capacity (spread_exponent): weighted by 1 / mean²
        result = law_tests.decide(rows, kind, variance=variance, **common)
    if not at_chance:
        return result
    named = ", ".join(f"{v:g}" for v in at_chance)
    return replace(result, detail=f"{result.detail}; at chance, left out: {swept} = {named}")


def _without_chance(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[float]]:
    """``rows`` without every value where a seed's capacity is at chance (a count a constant
    output reaches is no capacity), and those values."""
    if "at_chance" not in rows:
        return rows, []
    values = rows["value"].astype(float)
    flagged = sorted(set(values[rows["at_chance"].astype(bool)]))
    return rows[~values.isin(flagged)], flagged


def law_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per law and curve (sweep, context, task); COLUMNS, ``p_holm`` over the table."""
    deciding = notion(capacity)
    b, low, high, settings = spread_exponent(decided_on(capacity))
    spread = (
        f"the seeds' SD grows as mean^{b:.2f} [{low:.2f}, {high:.2f}] (95%) over this run's "
        f"{settings} settings; 1 is a spread proportional to the mean"
    )
    rows = []
    for keys, law, curve, result in curve_tests(capacity):
        sweep, swept = keys["sweep"], SWEPT[keys["sweep"]]
        kind = next(k for name, k, _ in LAWS[sweep] if name == law)
        measured = _measured(result, kind, curve, keys["n"], swept)
        unweighted = float("nan")
        if deciding == "fitted_T":
            most = describe(estimates(curve, "most_memorized"), swept)
            measured += f"; most memorized (paper A's plotted notion, not deciding): {most}"
        if kind == "linear":
            plain = _decide(curve, kind, keys["n"], swept, variance="constant")
            unweighted = plain.p_value
            measured += f"; unweighted: {plain.detail} ({plain.outcome})"
        criterion = CRITERIA[kind].format(x=swept, spread=spread)
        rows.append(
            {
                "law": law,
                "sweep": sweep,
                "curve": f"{keys['context']} context, {keys['task']}",
                "notion": deciding,
                "criterion": f"{criterion}; {NOTIONS[deciding]}",
                "measured": measured,
                "holds": result.outcome == "holds",
                **result.row(),
                "p_unweighted": unweighted,
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["p_holm"] = law_tests.holm(table["p_value"])
    return table


def _measured(result: LawTest, kind: str, curve: pd.DataFrame, n: int, swept: str) -> str:
    """The seed means, then where growth stops (grows up to n), then the test's detail."""
    head = describe(estimates(curve), swept)
    if kind == "grows to" and "stop" in result.extra:
        head += f"; growth stops at {swept} = {result.extra['stop']:g} (n = {n})"
    return f"{head}; {result.detail}"


def describe(stats: pd.DataFrame, swept: str) -> str:
    """A curve's seed means ± standard errors at every value ("≥" where a seed's value is a
    lower bound), the best seeds beside them."""
    seeds = int(stats["count"].max())
    values = ", ".join(str(v) for v in stats.index)
    lower = stats.get("lower_bounds", pd.Series(0, index=stats.index)) > 0
    means = ", ".join(
        f"{'≥ ' if b else ''}{m:.1f} ± {s:.1f}"
        for m, s, b in zip(stats["mean"], stats["se"], lower, strict=True)
    )
    best = ", ".join(f"{b:.0f}" for b in stats["best"])
    return f"{means} at {swept} = {values} (means ± SE of {seeds} seeds; best seeds {best})"
