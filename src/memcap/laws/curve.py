"""Any law decided on one curve's seed-level rows (``decide``), for both papers.

A capacity (or accuracy) estimate is a random variable: the seeds of a setting are replicates,
and every test uses their spread as its reference. Outcomes are ``holds``, ``fails``,
``inconclusive`` or ``untestable on this grid`` (too few values of x for the test, a property
of the grid rather than of the seeds), each with its test statistic and p-value; an
inconclusive test also carries its power and the seeds 80% power would need
(:mod:`memcap.laws.power`).

- **A form** (``linear``, ``quadratic``, ``hinge``: piecewise linear with a known knot;
  :mod:`memcap.laws.forms`): the lack-of-fit F-test of the least-squares fit over every seed
  against the per-x means, the seeds' pure error as reference (F = [SS_lof / (k − p)] /
  [SS_pe / (N − k)] for k values, p coefficients, N points). p ≥ ``HOLD_P`` holds,
  p < ``FAIL_P`` fails, between is inconclusive. Where the seeds' spread grows with the mean
  (paper A's capacities), the fit and both sums of squares are weighted by 1 / mean²
  (``variance="proportional"``). A law that the quantity *grows* in that form also needs its
  growth term's 95% interval above zero (below: fails; containing zero: inconclusive).
- **Grows** (monotone trend; :mod:`memcap.laws.trend`): the Jonckheere–Terpstra statistic
  (pairs of seeds at a smaller and a larger x that increase, ties counted half), its
  one-sided p-value from a permutation test of the seeds across x
  (``scipy.stats.permutation_test``; at its floor 1/(B + 1) the p-value is printed "≤").
  p < ``ALPHA`` holds; a decrease significant at ``ALPHA`` fails. **Grows up to** a reference
  x: also every step's paired relative change y(x) / y(x⁻) − 1 by a one-sided t-test
  (:mod:`memcap.laws.paired`, as the tests below); growth stops at the largest x whose step
  is significantly positive, and the law holds only when the trend holds and the step into
  the reference is significantly positive (intersection-union: p the larger of the two); a
  significant fall into the reference fails.
- **Saturates** beyond a reference x (gains stop): a one-sided non-superiority t-test of the
  paired relative change of every larger x against +``MARGIN``, the largest p over x: holds
  when every 95% upper bound lies below +MARGIN, fails when one change lies significantly
  above it (Bonferroni over the values).
- **Equivalence** (:func:`~memcap.laws.paired.equivalence`,
  :func:`~memcap.laws.paired.compare`): two one-sided t-tests (TOST) of the per-seed relative
  change within ± ``MARGIN``.

Censored x (a ceiling bounds their seed mean, not the law) are left out of every test and
named; seeds whose values are lower bounds enter every test as right-censored
(:mod:`memcap.laws.censored`). :func:`decide` takes seed-level rows (a DataFrame of x, seed
and y) for any caller.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from memcap.laws.common import COEFFICIENTS, UNTESTABLE, LawTest, no_test
from memcap.laws.forms import decide_form
from memcap.laws.paired import decide_saturates, grows_to
from memcap.laws.trend import decide_grows


def _paired(rows: pd.DataFrame, x: str, y: str, seed: str) -> pd.DataFrame:
    """Seeds × x (the seeds present at every x), the mean over repeated rows."""
    table = rows.pivot_table(index=seed, columns=x, values=y, aggfunc="mean").dropna()
    return table.set_axis(table.columns.astype(float), axis=1)


def _paired_with_flags(rows, x: str, y: str, seed: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`_paired` of ``y`` and, aligned with it, which of those values are lower bounds."""
    table = _paired(rows, x, y, seed)
    flags = rows.assign(_lower=rows["_lower"].astype(float))
    flags = flags.pivot_table(index=seed, columns=x, values="_lower", aggfunc="max")
    flags = flags.set_axis(flags.columns.astype(float), axis=1)
    return table, flags.reindex(index=table.index, columns=table.columns).fillna(0.0) > 0


def decide(
    rows,
    law: str,
    *,
    x: str = "value",
    y: str = "capacity",
    seed: str = "seed",
    knot: float = float("nan"),
    reference: float | None = None,
    censored: str | None = None,
    lower_bounds: str | None = None,
    grows: bool = True,
    variance: str = "constant",
    name: str | None = None,
) -> LawTest:
    """Decide ``law`` on seed-level ``rows`` (a DataFrame with columns ``x``, ``seed``, ``y``).

    ``law``: ``linear``, ``quadratic``, ``hinge`` (with ``knot``), ``grows`` (with a
    ``reference``: grows up to it, :func:`grows_to`) or ``saturates`` (every x above
    ``reference`` against it, seeds paired). Every x where a row's ``censored`` column is
    true is left out (named in the detail: a censored seed's value is a lower bound, so that x
    has no mean). Every row where ``lower_bounds`` is true is a seed whose y is only a lower
    bound (right-censored): every test takes it as censored (:mod:`memcap.laws.censored`),
    and the detail counts them. ``grows`` asks forms for a rising growth term; ``variance`` is
    the forms' variance model (:func:`decide_form`); ``name`` names x in the detail (default
    ``x``).
    """
    name = name or x
    left_out = ""
    if censored is not None and censored in rows:
        flagged = sorted(set(rows.loc[rows[censored].astype(bool), x].astype(float)))
        if flagged:
            left_out = f"; censored, left out: {name} = " + ", ".join(f"{v:g}" for v in flagged)
        rows = rows[~rows[x].astype(float).isin(flagged)]
    rows = rows.assign(_lower=False if lower_bounds is None else rows[lower_bounds].astype(bool))
    if rows["_lower"].any():
        at = ", ".join(f"{v:g}" for v in sorted(set(rows.loc[rows["_lower"], x].astype(float))))
        left_out += (
            f"; {int(rows['_lower'].sum())} of {len(rows)} seeds are lower bounds ({name} = {at}), "
            "taken as right-censored"
        )
    xs, ys, lower = rows[x].to_numpy(float), rows[y].to_numpy(float), rows["_lower"].to_numpy()
    if law in COEFFICIENTS:
        result = decide_form(xs, ys, law, knot, grows=grows, variance=variance, lower=lower)
    elif law == "grows":
        result = decide_grows(xs, ys, lower=lower)
        if reference is not None and result.outcome != UNTESTABLE:
            table, flags = _paired_with_flags(rows, x, y, seed)
            result = grows_to(result, table, float(reference), name, flags)
    elif law == "saturates":
        if reference is None:
            raise ValueError("the saturates law needs its reference x")
        table, flags = _paired_with_flags(rows, x, y, seed)
        if float(reference) not in table.columns or len(table) < 2:
            result = no_test("saturates", f"fewer than two seeds at {name} = {reference:g}")
        else:
            later = [c for c in table.columns if c > reference]
            others = {c: table[c].to_numpy() for c in later}
            marks = (flags[float(reference)].to_numpy(), {c: flags[c].to_numpy() for c in later})
            result = decide_saturates(table[float(reference)].to_numpy(), others, lower=marks)
    else:
        raise ValueError(f"unknown law '{law}'; use linear, quadratic, hinge, grows or saturates")
    return replace(result, detail=result.detail + left_out) if left_out else result
