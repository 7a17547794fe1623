"""Scaling laws decided by hypothesis tests on seed-level data, for both papers (docs/laws.md).

Modules: :mod:`~memcap.laws.common` (thresholds, :class:`LawTest`, what every test shares),
:mod:`~memcap.laws.forms` (a form by the lack-of-fit F-test), :mod:`~memcap.laws.trend`
(growth by the Jonckheere–Terpstra test), :mod:`~memcap.laws.paired` (tests on seeds paired
across x: steps, no gain, alike, bounds, published values), :mod:`~memcap.laws.censored`
(the same with seeds that are lower bounds), :mod:`~memcap.laws.curve`
(:func:`decide`: any law on one curve's rows) and :mod:`~memcap.laws.power` (power, seeds
needed, Holm's adjustment). The names both papers' laws call are imported here.
"""

from memcap.laws.common import (
    ALPHA,
    COEFFICIENTS,
    FAIL_P,
    HOLD_P,
    MARGIN,
    PERMUTATIONS,
    TESTS,
    UNTESTABLE,
    LawTest,
    design,
    p_text,
)
from memcap.laws.curve import decide
from memcap.laws.forms import decide_form
from memcap.laws.paired import (
    Equivalence,
    Step,
    compare,
    decide_above,
    decide_match,
    decide_saturates,
    equivalence,
    grows_to,
    steps,
)
from memcap.laws.power import holm, joint
from memcap.laws.trend import decide_grows

__all__ = [
    "ALPHA", "COEFFICIENTS", "FAIL_P", "HOLD_P", "MARGIN", "PERMUTATIONS", "TESTS",
    "UNTESTABLE", "Equivalence", "LawTest", "Step", "compare", "decide", "decide_above",
    "decide_form", "decide_grows", "decide_match", "decide_saturates", "design",
    "equivalence", "grows_to", "holm", "joint", "p_text", "steps",
]  # fmt: skip
