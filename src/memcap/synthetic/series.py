"""The protocol of a synthetic sweep: every series walks its T ladder, then the convergence
check; what each series then reports.

A *series* is one setting (sweep value, context, task) and replicate seed. Its datasets are
nested (the first T examples of one draw), so its memorized counts compare along T. Every
series of every setting follows the same protocol:

1. **The recipe's ladder** (:func:`climb`). The listed T grid trains in increasing order, one
   pass per T (a *rung*), or the whole grid in one pass when the ladder neither grows nor warm
   starts. A series still memorizing ``ladder.grow_at`` of its largest T, or (with
   ``ladder.past_maximum``) more there above chance than ``RISE`` over its most above chance
   at every smaller T (:func:`rises`), goes on at ``ladder.factor`` times that T, until
   neither holds or the next T would pass ``ladder.max_T``. With ``warm_start`` a rung starts
   from the series' state at the previous one. A replica memorizing more than ``DROP`` below
   what its series memorized at a smaller T (the optimiser's doing: the datasets are nested)
   trains again from a fresh initialisation, ``ladder.restarts`` times at most; the better
   training counts.
2. **The convergence check** (:func:`check`), when ``convergence.factor`` > 1: every series
   trains again with ``factor`` times its recipe's budget, from the initialisation of its
   capacity training, at that T and up the ladder while it memorizes ``grow_at`` of T (a
   series that fitted every example of its capacity T is tested at the next), and, past the
   maximum, on from its largest T while the longer budget's count there still rises.
3. **The bracket** (:func:`bracket`), when ``ladder.bracket`` is set: ``fitted_T`` bisected
   between the T tried, on one geometric grid of T for every series, until a fitted T and an
   unfitted one are at most ``bracket`` apart, every unfitted end trained with the check's
   longer budget too.
4. **What a series reports** (:class:`Series`): per T its best training; its capacity, the
   most examples memorized at any T by either budget (paper A's plotted notion, a lower bound
   on the model's capacity: it depends on how far the T grid goes); ``fitted_T``, the largest T
   fitted exactly (the theorem's notion); whether its capacity is bracketed by a larger T that
   memorized no more (past the maximum: at most ``RISE`` more above chance); and the check's
   gain, the longer budget's count over the recipe's, minus one. The setting-level decision
   on the gains is :mod:`memcap.synthetic.summary`'s.

Training itself is the caller's: ``train`` takes replicas and their warm-start states (None:
a fresh initialisation) and returns one :class:`Trained` per replica. This module decides
which replicas train and keeps the results. No torch import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memcap.synthetic.settings import Convergence, Ladder, Replica, Setting, StageSettings

if TYPE_CHECKING:
    from torch import Tensor

    State = dict[str, Tensor]

DROP = 0.10  # a memorized count this far below a smaller T's has fallen along T
RISE = 0.05  # past the maximum, a count this far above every smaller T's is still rising
BRACKET_PADDING = 1.0  # the bracket's passes: a batched model's padded work at most 2x its own


@dataclass
class Trained:
    """One training of a replica: its result row, saturation rows and trained parameters."""

    row: dict[str, Any]
    saturation: list[dict[str, Any]]
    state: State | None  # kept for warm starts only
    restart: int

    @property
    def memorized(self) -> int:
        return self.row["memorized"]


Train = Callable[[list[Replica], list["State | None"]], Mapping[Replica, Trained]]


@dataclass(eq=False)
class Series:
    """One setting and replicate seed: its trainings along T and what they report."""

    setting: Setting
    seed: int
    recipe: dict[int, Trained] = field(default_factory=dict)  # per T: best at the recipe's budget
    longer: dict[int, Trained] = field(default_factory=dict)  # per T: the convergence check's

    def keep(self, replica: Replica, trained: Trained) -> None:
        """Keep ``trained`` if it memorized more than the series' training of its T and budget."""
        kept = self.longer if replica.budget else self.recipe
        if replica.T not in kept or trained.memorized > kept[replica.T].memorized:
            kept[replica.T] = trained

    def best(self, T: int) -> Trained:
        """The better training at ``T`` of the two budgets (the recipe's on a tie)."""
        trainings = [t for t in (self.recipe.get(T), self.longer.get(T)) if t is not None]
        return max(trainings, key=lambda t: t.memorized)  # max keeps the first on a tie

    @property
    def T_tried(self) -> list[int]:
        """Every T the series trained at, increasing."""
        return sorted(self.recipe.keys() | self.longer.keys())

    def fell(self, T: int) -> bool:
        """Whether the recipe's count at ``T`` lies more than ``DROP`` below the series' best
        count at a smaller T."""
        before = self.most_before(T)
        return before is not None and self.recipe[T].memorized < (1.0 - DROP) * before

    def most_before(self, T: int) -> int | None:
        """The most examples memorized at a T below ``T`` by either budget (None: none tried)."""
        return max((self.best(t).memorized for t in self.T_tried if t < T), default=None)

    def above_chance(self, T: int) -> float:
        """The best count at ``T`` less what a constant output counts there (the row's
        ``chance``, 0 where none was recorded)."""
        best = self.best(T)
        return best.memorized - best.row.get("chance", 0.0)

    def grows(self, ladder: Ladder, T: int) -> bool:
        """Whether the series goes on from ``T``: :func:`grows` on its best counts, the rise
        past the maximum read above chance (chance itself grows with T)."""
        above = {t: self.above_chance(t) for t in self.T_tried if t <= T}
        return grows(ladder, self.best(T).memorized, T, above)

    def latest_state(self) -> State | None:
        """The trained state at the largest T of the recipe so far (warm starts)."""
        return self.recipe[max(self.recipe)].state if self.recipe else None

    def fitted(self, T: int) -> bool:
        """Whether either budget fitted every example at ``T``."""
        return self.best(T).memorized >= T

    @property
    def fitted_bracket(self) -> tuple[int, int | None]:
        """(largest T fitted, 0 if none; the smallest larger T tried and not fitted, None if
        every larger T was fitted: the bracket of ``fitted_T``."""
        tried = self.T_tried
        low = max((T for T in tried if self.fitted(T)), default=0)
        return low, next((T for T in tried if low < T and not self.fitted(T)), None)

    @property
    def recipe_capacity(self) -> tuple[int, Trained]:
        """The T and training of the recipe's most memorized count (the smaller T on a tie)."""
        return max(self.recipe.items(), key=lambda item: (item[1].memorized, -item[0]))

    @property
    def capacity(self) -> int:
        """The most examples memorized at any T by either budget."""
        return max(self.best(T).memorized for T in self.T_tried)

    @property
    def gain(self) -> float:
        """The convergence check's relative gain: the longer budget's most memorized count over
        the recipe's, minus one (NaN without the check)."""
        if not self.longer:
            return float("nan")
        before = self.recipe_capacity[1].memorized
        after = max(t.memorized for t in self.longer.values())
        return (after - before) / max(before, 1)

    def rows(self) -> list[dict[str, Any]]:
        """One result row per T tried: its best training, the restart it came from, and the
        series' gain."""
        rows = []
        for T in self.T_tried:
            trained = self.best(T)
            rows.append(trained.row | {"restarts": trained.restart, "convergence_gain": self.gain})
        return rows


def grows(ladder: Ladder, memorized: int, T: int, above: Mapping[int, float] | None = None) -> bool:
    """Whether a series that memorized ``memorized`` of ``T`` goes on at :func:`next_T`: it
    memorized ``grow_at`` of T, or (``past_maximum``) its count above chance still rises at
    T (``above``: per T tried up to T, its count less chance; :func:`rises`), and the next T
    stays within ``max_T``."""
    if ladder.grow_at is None or next_T(ladder, T) > ladder.max_T:
        return False
    still = ladder.past_maximum and above is not None and rises(above, T)
    return memorized >= ladder.grow_at * T or still


def rises(above: Mapping[int, float], T: int) -> bool:
    """Whether the count above chance at ``T`` lies more than ``RISE`` over the most at any
    smaller T in ``above`` (False where none was tried): a plateau's noise of a few examples
    does not walk the ladder on, each rung doubling the cost."""
    before = [count for t, count in above.items() if t < T]
    return bool(before) and above[T] > (1.0 + RISE) * max(before)


def next_T(ladder: Ladder, T: int) -> int:
    """The T after ``T`` on a grown grid."""
    return max(T + 1, math.ceil(ladder.factor * T))


def climbed_from(T: int, ladder: Ladder) -> list[int]:
    """``T`` and every T a grown grid may go on to from it, up to ``ladder.max_T``."""
    rungs = [T]
    while ladder.grow_at is not None and next_T(ladder, rungs[-1]) <= ladder.max_T:
        rungs.append(next_T(ladder, rungs[-1]))
    return rungs


def censor_level(grow_at: float | None) -> float:
    """The memorized fraction of a series' largest T at or above which its capacity is
    censored (the grid, not the model, bounds it): ``grow_at``, or every example where the
    grid does not grow."""
    return 1.0 if grow_at is None else grow_at


def whole_grid(ladder: Ladder) -> bool:
    """Whether the recipe's ladder trains the whole grid in one pass (it neither grows nor
    warm starts)."""
    return ladder.grow_at is None and not ladder.warm_start


def climb(series: list[Series], grid: tuple[int, ...], ladder: Ladder, train: Train) -> None:
    """Step 1 of the protocol: every series up its T ladder at the recipe's budget."""
    if whole_grid(ladder):
        _rung([(s, T) for s in series for T in grid], ladder, train)
        return
    for T in grid:
        _rung([(s, T) for s in series], ladder, train)
    growing = [s for s in series if s.grows(ladder, T)]
    while growing:
        T = next_T(ladder, T)
        _rung([(s, T) for s in growing], ladder, train)
        growing = [s for s in growing if s.grows(ladder, T)]


def _rung(members: list[tuple[Series, int]], ladder: Ladder, train: Train) -> None:
    """Train ``members`` (series, T) at the recipe's budget, warm-started where the ladder says
    so, then restart those that fell along T."""
    states = [s.latest_state() if ladder.warm_start else None for s, _ in members]
    _train(members, [0] * len(members), states, train)
    for restart in range(1, ladder.restarts + 1):
        fallen = [(s, T) for s, T in members if s.fell(T)]
        if not fallen:
            return
        _train(fallen, [0] * len(fallen), [None] * len(fallen), train, restart)


def check(
    series: list[Series],
    ladder: Ladder,
    convergence: Convergence,
    budget: Callable[[int], int],
    train: Train,
) -> None:
    """Step 2 of the protocol: every series again with ``convergence.factor`` times its
    recipe's budget at T (``budget(T)``), from its capacity training's initialisation, at its
    capacity T and up the ladder while it memorizes ``grow_at`` of T; past the maximum only
    from the largest T the series tried, where the longer budget's count still rises
    (:func:`rises`): no larger T brackets it yet. Below that T the recipe's ladder already went
    past the maximum, and the check asks about the budget, not the grid."""
    if not convergence.enabled:
        return
    walk = [(s, *_capacity_start(s)) for s in series]
    while walk:
        members = [(s, T) for s, T, _ in walk]
        budgets = [convergence.factor * budget(T) for _, T, _ in walk]
        _train(members, budgets, [None] * len(walk), train, [r for _, _, r in walk])
        walk = [
            (s, next_T(ladder, T), restart)
            for s, T, restart in walk
            if grows(ladder, s.best(T).memorized, T) or _still_open(s, ladder, T)
        ]


def _still_open(series: Series, ladder: Ladder, T: int) -> bool:
    """Whether ``T`` is the series' largest T tried and its best count there still rises
    above chance past the maximum (:meth:`Series.grows`): the check walks on to bracket it."""
    return ladder.past_maximum and max(series.T_tried) == T and series.grows(ladder, T)


def bracket(
    series: list[Series],
    ladder: Ladder,
    convergence: Convergence,
    budget: Callable[[int], int],
    train: Train,
) -> None:
    """Step 3 of the protocol: every series' ``fitted_T`` bisected until a fitted T and an
    unfitted one are at most ``ladder.bracket`` apart (or one example apart). Each pass trains
    a series at most once: the recipe at its bracket's geometric midpoint (halving down from
    the smallest T tried while none is fitted) while the bracket is wider, then the check's
    longer budget at its unfitted end if that end has not had it, so that the end is unfitted
    by both budgets (a fit there moves the bracket up, and the bisection goes on).
    ``train`` may batch the pass's T together."""
    if ladder.bracket is None:
        return
    factor = convergence.factor if convergence.enabled else 0
    while True:
        members, budgets = [], []
        for s in series:
            low, high = s.fitted_bracket
            if high is None:
                continue  # every T tried fitted: censored above
            if (mid := between(low, high, ladder.bracket)) is not None:
                members.append((s, mid))
                budgets.append(0)
            elif factor and high not in s.longer:
                members.append((s, high))
                budgets.append(factor * budget(high))
        if not members:
            return
        _train(members, budgets, [None] * len(members), train)


def bracket_grouping(stage: StageSettings) -> StageSettings:
    """How the bracket's passes batch: their series sit at many T each, so not one model a T
    but buckets of any T whose padding stays within ``BRACKET_PADDING`` (the stage's own
    ``max_padding`` where set); the other keys of ``group_by`` as configured."""
    keys = tuple(key for key in stage.group_by if key != "T")
    return replace(stage, group_by=keys, max_padding=stage.max_padding or BRACKET_PADDING)


def between(low: int, high: int, ratio: float) -> int | None:
    """The next T to try inside the bracket (``low`` fitted, ``high`` not): None when it is
    narrow enough (``high`` at most ``ratio`` × ``low``, or one example above it); about half
    of ``high`` while nothing is fitted; else about the geometric midpoint. Both are snapped to
    one geometric grid of T, 2^(j/k) with k steps a doubling each at most ``ratio`` wide, so
    that series whose brackets overlap train the same T (one batched model a T)."""
    if high - low <= 1 or (low > 0 and high <= ratio * low):
        return None
    steps = math.ceil(math.log(2) / math.log(ratio))  # grid points a doubling
    if low == 0:
        index = steps * math.log2(high) - steps
    else:
        index = steps * (math.log2(low) + math.log2(high)) / 2
    return min(high - 1, max(low + 1, round(2 ** (round(index) / steps))))


@dataclass(frozen=True)
class Pass:
    """One pass as :func:`passes` bounds it: each series at every T of ``T`` (``one_of``: at
    one of them), from initialisation ``restart``, with the check's budget where ``longer``."""

    T: tuple[int, ...]
    restart: int = 0
    longer: bool = False
    one_of: bool = False


def passes(grid: tuple[int, ...], ladder: Ladder, convergence: Convergence) -> list[Pass]:
    """At least every training steps 1 and 2 of the protocol give a series, whatever it
    memorizes (the cost model's bound; the bracket's: :func:`bracket_passes`). The ladder:
    every rung it may reach, ``ladder.restarts`` times again. The check's pass k (a walk's
    k-th step) holds each series at most once, at a T k rungs or more up the T its walks can
    reach; without growth each series checks once, at its capacity T, one of the rungs."""
    rungs = list(dict.fromkeys([*grid, *climbed_from(grid[-1], ladder)]))
    restarts = range(ladder.restarts + 1)
    if whole_grid(ladder):
        plan = [Pass(tuple(rungs), k) for k in restarts]
    else:
        plan = [Pass((T,), k) for T in rungs for k in restarts]
    if not convergence.enabled:
        return plan
    checked = sorted({T for start in rungs for T in climbed_from(start, ladder)})
    if ladder.grow_at is None:
        return [*plan, Pass(tuple(checked), longer=True, one_of=True)]
    return plan + [Pass(tuple(checked[k:]), longer=True) for k in range(len(checked))]


def bracket_passes(grid: tuple[int, ...], ladder: Ladder) -> list[tuple[int, int]]:
    """At most how many trainings :func:`bracket` gives one series, as (trainings, the largest
    T among them) pairs (for the cost model): two a halving of the smallest T down to one;
    for every rung the bracket may reach (a longer budget that fits the unfitted end moves the
    bracket up a rung), one to check its end and two a bisection of a rung's ratio
    (``ladder.factor``, or the grid's widest step) down to ``ladder.bracket``, all at T up to
    that rung; and as many after a halving found a fit."""
    if ladder.bracket is None:
        return []
    rungs = [*grid[:-1], *climbed_from(grid[-1], ladder)]
    steps = [b / a for a, b in zip(rungs, rungs[1:], strict=False)] + [ladder.factor]
    bisections = max(0, math.ceil(math.log2(math.log(max(steps)) / math.log(ladder.bracket))))
    halvings = math.ceil(math.log2(max(2, rungs[0])))
    per_rung = 2 * bisections + 1
    return [(2 * halvings + per_rung, rungs[0])] + [(per_rung, T) for T in rungs]


def _capacity_start(series: Series) -> tuple[int, int]:
    """The T and restart (its initialisation) of the series' recipe capacity."""
    T, trained = series.recipe_capacity
    return T, trained.restart


def _train(
    members: list[tuple[Series, int]],
    budgets: list[int],
    states: list[State | None],
    train: Train,
    restart: int | list[int] = 0,
) -> None:
    """Train one pass of replicas and keep every training in its series."""
    restarts = restart if isinstance(restart, list) else [restart] * len(members)
    replicas = [
        Replica(s.setting, s.seed, T, restart=r, budget=b)
        for (s, T), r, b in zip(members, restarts, budgets, strict=True)
    ]
    trained = train(replicas, states)
    for (s, _), replica in zip(members, replicas, strict=True):
        s.keep(replica, trained[replica])
