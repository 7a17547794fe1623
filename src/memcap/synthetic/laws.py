"""Paper A's three scaling laws decided on this run's seed-level capacities, one row per curve.

Theorem 1 with its construction predicts capacity linear in H, growing with the context size
n, and growing with the head dimension d_h up to d_h = n with no change beyond it. Each
curve (sweep, context kind, task) is decided on every seed's capacity (``capacity_table``
rows) by :mod:`memcap.law_tests`, the seeds of a setting being its replicates:

- ``linear in H``: lack-of-fit F-test of the line against the per-H means (p ≥ 0.05 holds,
  p < 0.01 fails, between inconclusive) and the slope's 95% interval above zero, weighted by
  1 / mean² (the seeds' spread is a fixed fraction of the capacity);
- ``grows with n`` and ``grows with d_h up to n``: Jonckheere–Terpstra trend test (a
  permutation p-value below 0.05 holds, a significant decrease fails);
- ``flat in d_h beyond n``: every d_h > n within ±10% of d_h = n, paired by seed (TOST: the
  90% interval of the relative change inside ±10% holds, entirely outside fails).

Censored settings (the grid, not the model, bounds a seed's estimate: ``capacity_table``'s
``censored``) are left out of the tests and named. The estimate of a setting is its seed mean
± standard error (:func:`estimates`); the best seed is reported beside it, not tested.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from memcap import law_tests
from memcap.law_tests import LawTest
from memcap.synthetic.settings import SWEPT

COLUMNS = [
    "law", "sweep", "curve", "criterion", "measured", "outcome", "holds",
    "test", "statistic", "p_value",
]  # fmt: skip
# Per sweep: (law, form of memcap.law_tests, the part of the curve it is decided on).
LAWS = {
    "heads": [("linear in H", "linear", "all")],
    "context_size": [("grows with n", "grows", "all")],
    "head_dim": [
        ("grows with d_h up to n", "grows", "up to n"),
        ("flat in d_h beyond n", "flat", "from n"),
    ],
}
CRITERIA = {
    "linear": (
        f"lack-of-fit F-test of the line against the per-{{x}} seed means: p ≥ "
        f"{law_tests.HOLD_P} holds, p < {law_tests.FAIL_P} fails; slope's 95% interval above 0"
    ),
    "grows": (
        f"Jonckheere–Terpstra trend over the seeds: p < {law_tests.ALPHA} holds, a decrease "
        f"at p < {law_tests.ALPHA} fails"
    ),
    "flat": (
        f"TOST of each {{x}} > n against {{x}} = n, paired by seed: "
        f"{1 - 2 * law_tests.ALPHA:.0%} interval of the change inside ±{law_tests.MARGIN:.0%} "
        "holds, outside fails"
    ),
}


def estimates(group: pd.DataFrame) -> pd.DataFrame:
    """Seed mean, standard error, standard deviation, seed count, best seed and the seeds'
    capacities of one curve, by swept value, and whether any seed's estimate is censored."""
    by_value = group.groupby("value")
    stats = by_value["capacity"].agg(["mean", "sem", "std", "count", "max"]).sort_index()
    stats = stats.rename(columns={"max": "best", "sem": "se"}).fillna({"se": 0.0, "std": 0.0})
    stats["seeds"] = by_value["capacity"].agg(lambda c: " ".join(str(int(v)) for v in c))
    censored = group.get("censored", pd.Series(False, index=group.index)).astype(bool)
    stats["censored"] = censored.groupby(group["value"]).any().reindex(stats.index)
    return stats


def curve_tests(capacity: pd.DataFrame) -> Iterator[tuple[dict, str, pd.DataFrame, LawTest]]:
    """Every law of every curve: (curve keys, law, the rows it is decided on, decision)."""
    for (sweep, context, task), group in capacity.groupby(["sweep", "context", "task"], sort=True):
        n = int(group["n"].iloc[0])
        keys = {"sweep": sweep, "context": context, "task": task, "n": n}
        for law, form, part in LAWS.get(sweep, []):
            rows = _part(group, part, n)
            yield keys, law, rows, _decide(rows, form, n)


def _part(group: pd.DataFrame, part: str, n: int) -> pd.DataFrame:
    if part == "up to n":
        return group[group["value"] <= n]
    if part == "from n":
        return group[group["value"] >= n]
    return group


def _decide(rows: pd.DataFrame, form: str, n: int) -> LawTest:
    censored = "censored" if "censored" in rows else None
    if form == "flat":
        return law_tests.decide(rows, "flat", reference=n, censored=censored)
    # the seeds' spread grows with the capacity (docs/laws.md): weighted by 1 / mean²
    return law_tests.decide(rows, form, censored=censored, variance="proportional")


def law_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per law and curve (sweep, context, task); COLUMNS."""
    rows = []
    for keys, law, curve, result in curve_tests(capacity):
        sweep = keys["sweep"]
        stats = estimates(curve)
        rows.append(
            {
                "law": law,
                "sweep": sweep,
                "curve": f"{keys['context']} context, {keys['task']}",
                "criterion": CRITERIA[result.law].format(x=SWEPT[sweep]),
                "measured": f"{describe(stats, SWEPT[sweep])}; {result.detail}",
                "holds": result.outcome == "holds",
                **result.row(),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def describe(stats: pd.DataFrame, swept: str) -> str:
    """A curve's seed means ± standard errors at every value, the best seeds beside them."""
    seeds = int(stats["count"].max())
    values = ", ".join(str(v) for v in stats.index)
    means = ", ".join(f"{m:.1f} ± {s:.1f}" for m, s in zip(stats["mean"], stats["se"], strict=True))
    best = ", ".join(f"{b:.0f}" for b in stats["best"])
    return f"{means} at {swept} = {values} (means ± SE of {seeds} seeds; best seeds {best})"
