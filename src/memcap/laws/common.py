"""What the law tests share: thresholds, a decision with its power, a form's design matrix.

:class:`LawTest` with its power where inconclusive, the one-sided t-test of a mean, how a
p-value is printed and the seed-level points every test reads; :mod:`memcap.laws` re-exports
the thresholds, :class:`LawTest`, :func:`p_text` and :func:`design`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

HOLD_P = 0.05  # lack-of-fit: p at or above this holds
FAIL_P = 0.01  # lack-of-fit: p below this fails
ALPHA = 0.05  # one-sided level of the trend, step, bound and each TOST side; 95% intervals
MARGIN = 0.10  # equivalence and non-superiority margin, relative to the reference
PERMUTATIONS = 9999
UNTESTABLE = "untestable on this grid"
COEFFICIENTS = {"linear": 2, "quadratic": 3, "hinge": 3}
TESTS = {
    "form": "lack-of-fit F",
    "grows": "Jonckheere–Terpstra",
    "grows to": "Jonckheere–Terpstra + step t",
    "saturates": "non-superiority t",
    "tost": "TOST",
}


@dataclass(frozen=True)
class LawTest:
    """One law's decision: outcome, test, statistic, p-value (``p_floor``: the smallest the
    test can return, 0 but for a sampled permutation test), what was measured, the power and
    seeds needed where inconclusive, and the fit (coefficients, covariance) of a form."""

    law: str  # linear, quadratic, hinge, grows, saturates, above or match
    outcome: str  # holds, fails, inconclusive or UNTESTABLE
    test: str
    statistic: float
    p_value: float
    detail: str
    form: str | None = None
    knot: float = float("nan")
    coefficients: tuple[float, ...] = ()
    covariance: tuple[tuple[float, ...], ...] = ()
    dof: int = 0  # residual degrees of freedom of the fit (t quantile of the band)
    p_floor: float = 0.0
    power: float = float("nan")  # inconclusive only: at ``power_at``
    seeds_needed: float = float("nan")  # seeds per setting for 80% power (inf: none ≤ limit)
    power_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The columns a laws table takes from the decision."""
        keys = ("outcome", "test", "statistic", "p_value", "p_floor", "power", "seeds_needed")
        return {k: getattr(self, k) for k in keys} | {"power_at": self.power_at}

    def band(self, x, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fitted form at ``x`` and its pointwise ``level`` confidence band."""
        if not self.coefficients:
            raise ValueError(f"a {self.law} decision has no fitted form")
        basis = design(np.asarray(x, dtype=float), self.form or "linear", self.knot)
        mean = basis @ np.asarray(self.coefficients)
        se = np.sqrt(np.einsum("ij,jk,ik->i", basis, np.asarray(self.covariance), basis))
        half = stats.t.ppf(0.5 + level / 2, max(self.dof, 1)) * se
        return mean, mean - half, mean + half


def p_text(p: float, floor: float = 0.0) -> str:
    """A p-value as printed: "p ≤ floor" at a permutation test's floor, else "p = " 3 digits."""
    return f"p ≤ {floor:.2g}" if floor > 0 and p <= floor * (1 + 1e-9) else f"p = {p:.3g}"


def with_power(result: LawTest, candidates: list[tuple[float, float, str]]) -> LawTest:
    """``result`` with the least powered of ``candidates`` (power, seeds needed, at what)."""
    if result.outcome != "inconclusive" or not candidates:
        return result
    power, seeds, at = min(candidates, key=lambda c: (c[0], -c[1]))
    return replace(result, power=power, seeds_needed=seeds, power_at=at)


def design(x: np.ndarray, form: str, knot: float = float("nan")) -> np.ndarray:
    """The design matrix of ``form`` at ``x``: intercept first."""
    x = np.asarray(x, dtype=float)
    if form == "linear":
        return np.stack([np.ones_like(x), x], axis=-1)
    if form == "quadratic":
        return np.stack([np.ones_like(x), x, x**2], axis=-1)
    if form == "hinge":
        if np.isnan(knot):
            raise ValueError("the hinge form needs its knot")
        return np.stack([np.ones_like(x), x, np.maximum(0.0, x - knot)], axis=-1)
    raise ValueError(f"unknown form '{form}'; use one of {sorted(COEFFICIENTS)}")


def no_test(law: str, why: str) -> LawTest:
    return LawTest(law, "inconclusive", "none", float("nan"), float("nan"), f"not testable: {why}")


def untestable(law: str, why: str) -> LawTest:
    detail = f"{UNTESTABLE}: {why}"
    return LawTest(law, UNTESTABLE, "none", float("nan"), float("nan"), detail)


def one_sample(values, target: float, alternative: str) -> tuple[float, float]:
    """One-sided t-test of the mean of ``values`` against ``target`` (``greater``: the mean
    above it); seeds that agree exactly decide by their common value."""
    values = np.asarray(values, dtype=float)
    mean, n = float(values.mean()), len(values)
    sign = 1.0 if alternative == "greater" else -1.0
    se = float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    if n < 2 or se == 0.0:
        beyond = sign * (mean - target) > 0
        return (float("inf") if beyond else float("-inf")), (0.0 if beyond else 1.0)
    t = sign * (mean - target) / se
    return t, float(stats.t.sf(t, n - 1))


def outcome_of(holds: bool, fails: bool) -> str:
    return "fails" if fails else "holds" if holds else "inconclusive"


def spread(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.std(ddof=1)) if len(values) > 1 else float("nan")


def points(x, y) -> tuple[np.ndarray, np.ndarray]:
    """Seed-level points (x, y) as 1-D float arrays, the pairs with a missing value left out."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("x and y must be 1-D arrays of the same length")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]
