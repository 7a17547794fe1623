"""Simulated behaviour of the law tests (:mod:`memcap.laws`) at the default run's noise.

Each row simulates seeds from a known truth, decides them with the real test, counts how often
each outcome falls, and sets the rate beside what the test must do (its level) or beside the
power :mod:`memcap.laws.power` predicts. ``tests/laws/test_laws_simulated.py`` checks every
row's requirement and that docs/laws.md holds this table; ``python
tests/helpers/law_simulation.py`` rewrites the table there.

The noise, measured on the stored default run (tests/data/default_run/files/results):
synthetic/capacity.csv gives each setting's seed SD over its mean (median 0.15 over 26
settings, 0.06–0.33), the per-seed relative change at d_h = 12 and 16 against d_h = n = 8 (SD
0.12 and 0.13) and of the step d_h = 4 → 8 (SD 0.10); aot/laws.csv the per-seed AoT / MLP − 1
at d = 7 (SD 0.07 over 3 seeds).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from memcap import laws as lt
from memcap.laws import power as law_power

CV = 0.15
GAIN_SD = 0.13
STEP_SD = 0.10
PAIR_SD = 0.07
SEEDS = 5
H = np.arange(1, 7, dtype=float)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "laws.md"
BEGIN, END = "<!-- simulated table: begin -->", "<!-- simulated table: end -->"


@dataclass(frozen=True)
class Row:
    """One simulated truth, the outcome rates of its test, and what they must satisfy."""

    truth: str
    test: str
    counted: str  # the outcome the requirement reads
    required: str
    rates: dict[str, float]
    runs: int
    predicted: float = float("nan")  # the power law_power predicts
    check: Callable[[float, int, float], bool] | None = None

    @property
    def ok(self) -> bool:
        return self.check is None or self.check(self.rates.get(self.counted, 0.0), self.runs,
                                                self.predicted)  # fmt: skip

    def markdown(self) -> str:
        rates = ", ".join(f"{k} {v:.1%}" for k, v in sorted(self.rates.items()) if v > 0)
        predicted = "" if np.isnan(self.predicted) else f"{self.predicted:.1%}"
        return (
            f"| {self.truth} | {self.test} | {self.required} | {rates} ({self.runs} runs) | "
            f"{predicted} |"
        )


def _se(p: float, runs: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 0.01 * 0.99) / runs))


def at_most(level: float) -> Callable[[float, int, float], bool]:
    return lambda rate, runs, _: rate <= level + 3 * _se(level, runs)


def at_least(level: float) -> Callable[[float, int, float], bool]:
    return lambda rate, runs, _: rate >= level - 3 * _se(level, runs)


def near_prediction(slack: float = 0.0) -> Callable[[float, int, float], bool]:
    return lambda rate, runs, p: abs(rate - p) <= 3 * _se(p, runs) + slack


def below_prediction(rate: float, runs: int, p: float) -> bool:
    return rate <= p + 3 * _se(p, runs)


def _rates(outcomes: list[str]) -> dict[str, float]:
    return {k: v / len(outcomes) for k, v in Counter(outcomes).items()}


def _seeds(means: np.ndarray, sd: np.ndarray, seeds: int, rng) -> tuple[np.ndarray, np.ndarray]:
    x = np.repeat(np.arange(1, len(means) + 1, dtype=float), seeds)
    return x, np.repeat(means, seeds) + rng.normal(size=len(x)) * np.repeat(sd, seeds)


def _bend(sd: np.ndarray, seeds: int, size: float) -> np.ndarray:
    """A bend whose largest departure from its own least-squares line is ``size`` standard
    errors of a setting's seed mean."""
    bend = (H - H.mean()) ** 2
    bend -= np.polyval(np.polyfit(H, bend, 1), H)
    return bend / np.abs(bend).max() * size * float(np.mean(sd)) / np.sqrt(seeds)


def form_rows(runs: int = 400) -> list[Row]:
    """The line of the H sweep, and a bend, weighted by 1 / mean² and unweighted."""
    rng = np.random.default_rng(1)
    line = 45.0 * H
    sd = CV * line
    out = {k: [] for k in ("line proportional", "line constant", "bend proportional",
                           "bend constant")}  # fmt: skip
    for _ in range(runs):
        straight, bent = _seeds(line, sd, SEEDS, rng), _seeds(line + _bend(sd, SEEDS, 3.0), sd,
                                                                SEEDS, rng)  # fmt: skip
        for variance in ("proportional", "constant"):
            out[f"line {variance}"].append(
                lt.decide_form(*straight, "linear", grows=True, variance=variance).outcome
            )
            out[f"bend {variance}"].append(
                lt.decide_form(*bent, "linear", variance=variance).outcome
            )
    truth = f"a line 45·H, H = 1…6, {SEEDS} seeds, seed SD {CV:.0%} of the mean"
    bend = "the same with a bend of 3 standard errors of a setting mean"
    test = {
        "proportional": "lack-of-fit F, 1/mean² weights",
        "constant": "lack-of-fit F, unweighted",
    }
    rows = [
        Row(truth, test["proportional"], "fails", f"fails ≤ {lt.FAIL_P:.0%} (its level)",
            _rates(out["line proportional"]), runs, check=at_most(lt.FAIL_P)),
        Row(truth, test["constant"], "fails", "reported beside it", _rates(out["line constant"]),
            runs),
        Row(bend, test["proportional"], "fails", "fails in most (> 50%)",
            _rates(out["bend proportional"]), runs, check=at_least(0.5)),
        Row(bend, test["constant"], "fails", "reported beside it", _rates(out["bend constant"]),
            runs),
    ]  # fmt: skip
    # The noncentral F power at a known bend (constant SD: the F is exact there).
    flat_sd = np.full(len(H), 0.15 * 45.0 * H.mean())
    bent = line + _bend(flat_sd, SEEDS, 3.0)
    fails = [
        lt.decide_form(*_seeds(bent, flat_sd, SEEDS, rng), "linear").outcome for _ in range(runs)
    ]
    means_fit = np.polyval(np.polyfit(H, bent, 1), H)
    lam = SEEDS * float(np.sum((bent - means_fit) ** 2)) / flat_sd[0] ** 2
    df_lof, df_pe = len(H) - 2, len(H) * (SEEDS - 1)
    observed_f = (lam + df_lof) * df_pe / (df_lof * (df_pe - 2))  # λ̂ of this F is λ
    predicted = law_power.lack_of_fit(observed_f, df_lof, df_pe, len(H), SEEDS, lt.FAIL_P)[0]
    rows.append(
        Row(f"the bend at a constant seed SD (λ = {lam:.1f})", test["constant"], "fails",
            "≈ the predicted power", _rates(fails), runs, predicted, near_prediction(0.02))
    )  # fmt: skip
    return rows


def _paired_table(reference: np.ndarray, changes: dict[float, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({8.0: reference, **{x: reference * (1 + c) for x, c in changes.items()}})


def saturation_rows(runs: int = 500) -> list[Row]:
    """No gain beyond n: the non-superiority test at the measured spread of the change."""
    rng = np.random.default_rng(2)
    test = f"non-superiority t at +{lt.MARGIN:.0%}"

    def outcomes(change: float, seeds: int, values: int) -> list[str]:
        out = []
        for _ in range(runs):
            reference = 180.0 * (1 + CV * rng.normal(size=seeds))
            others = {12.0 + 4 * i: reference * (1 + change + GAIN_SD * rng.normal(size=seeds))
                      for i in range(values)}  # fmt: skip
            out.append(lt.decide_saturates(reference, others).outcome)
        return out

    effect = lt.MARGIN / GAIN_SD
    both = [lambda n: law_power.one_sided_t(effect, n, lt.ALPHA)] * 2
    predicted, needed = law_power.joint(both, SEEDS)
    truth = f"no gain at d_h = 12, 16 (n = 8), {{}} seeds, SD of the change {GAIN_SD:.0%}"
    return [
        Row(truth.format(SEEDS), test, "holds", "≈ the predicted power",
            _rates(outcomes(0.0, SEEDS, 2)), runs, predicted, near_prediction()),
        Row(truth.format(f"{needed:.0f} (the predicted 80% count)"), test, "holds", "≥ 80%",
            _rates(outcomes(0.0, int(needed), 2)), runs, law_power.joint(both, int(needed))[0],
            at_least(0.8)),
        Row(f"a gain of +{lt.MARGIN:.0%} (the margin) at d_h = 12, 16", test, "holds",
            f"holds ≤ {lt.ALPHA:.0%} (its level)", _rates(outcomes(lt.MARGIN, SEEDS, 2)), runs,
            check=at_most(lt.ALPHA)),
        Row("a gain of +30% at d_h = 12, 16", test, "fails", "fails in most (> 50%)",
            _rates(outcomes(0.30, SEEDS, 2)), runs, check=at_least(0.5)),
    ]  # fmt: skip


def step_rows(runs: int = 1000) -> list[Row]:
    """The step into n (its one-sided t-test) and where growth stops (:func:`lt.steps`)."""
    rng = np.random.default_rng(3)
    test = "paired step t (into d_h = n)"

    def walk(gains: list[float], sd: float) -> list[list[lt.Step]]:
        out = []
        for _ in range(runs):
            level = 100.0 * (1 + CV * rng.normal(size=SEEDS))
            table = {1.0: level}
            for x, gain in zip([2.0, 4.0, 8.0], gains, strict=True):
                level = level * (1 + gain + sd * rng.normal(size=SEEDS))
                table[x] = level
            out.append(lt.steps(pd.DataFrame(table)))
        return out

    def up(walks: list[list[lt.Step]]) -> dict[str, float]:
        hits = np.mean([w[-1].p_up < lt.ALPHA for w in walks])
        return {"step significant": float(hits), "not": 1 - float(hits)}

    effect = lt.MARGIN / STEP_SD
    predicted = law_power.one_sided_t(effect, SEEDS, lt.ALPHA)
    growing = walk([0.4, 0.4, 0.4], 0.2)
    stops = Counter(
        f"stops at {max((s.end for s in w if s.p_up < lt.ALPHA), default=1.0):g}" for w in growing
    )
    truth = f"d_h = 1, 2, 4, 8 (n = 8), {SEEDS} seeds, SD of a step {STEP_SD:.0%}"
    return [
        Row(f"{truth}; a +{lt.MARGIN:.0%} step into n", test, "step significant",
            "≈ the predicted power", up(walk([0.4, 0.4, lt.MARGIN], STEP_SD)), runs, predicted,
            near_prediction()),
        Row(f"{truth}; no step into n", test, "step significant", f"≤ {lt.ALPHA:.0%} (its level)",
            up(walk([0.4, 0.4, 0.0], STEP_SD)), runs, check=at_most(lt.ALPHA)),
        Row("+40% every step up to n, SD of a step 20%", "where growth stops", "stops at 8",
            "at n in ≥ 90%", {k: v / runs for k, v in stops.items()}, runs,
            check=at_least(0.9)),
    ]  # fmt: skip


def equivalence_rows(runs: int = 1000) -> list[Row]:
    """TOST of two models alike (paper B's AoT against the MLP-Transformer)."""
    rng = np.random.default_rng(4)
    test = f"TOST at ±{lt.MARGIN:.0%}"

    def alike(change: float, sd: float, seeds: int) -> dict[str, float]:
        reference = 0.15 * (1 + 0.1 * rng.normal(size=(runs, seeds)))
        other = reference * (1 + change + sd * rng.normal(size=(runs, seeds)))
        hits = np.mean(
            [lt.equivalence(r, o).equivalent for r, o in zip(reference, other, strict=True)]
        )
        return {"alike": float(hits), "not": 1 - float(hits)}

    bound = lt.MARGIN / PAIR_SD
    rows = []
    for seeds in (3, int(law_power.tost_seeds(0.0, -bound, bound, lt.ALPHA))):
        predicted = law_power.tost(0.0, -bound, bound, seeds, lt.ALPHA)
        rows.append(
            Row(f"two models alike, {seeds} seeds, SD of the change {PAIR_SD:.0%}", test,
                "alike", "≈ the predicted power", alike(0.0, PAIR_SD, seeds), runs, predicted,
                near_prediction())
        )  # fmt: skip
    rows.append(
        Row("a 20% change, 8 seeds, SD 10%", test, "alike", f"≤ {lt.ALPHA:.0%} (its level)",
            alike(0.2, 0.1, 8), runs, check=at_most(lt.ALPHA))
    )  # fmt: skip
    return rows


def trend_rows(runs: int = 60) -> list[Row]:
    """The Jonckheere–Terpstra permutation test against its simulated power."""
    rng = np.random.default_rng(5)
    test = "Jonckheere–Terpstra"

    def holds(means: np.ndarray) -> dict[str, float]:
        return _rates([lt.decide_grows(*_seeds(means, CV * means, SEEDS, rng), power=False).outcome
                       for _ in range(runs)])  # fmt: skip

    weak = 100.0 + 4.0 * H
    predicted = law_power.trend(weak, CV * weak, SEEDS, lt.ALPHA)
    flat = np.full(len(H), 100.0)
    return [
        Row(f"a weak trend 100 + 4·H, H = 1…6, {SEEDS} seeds, seed SD {CV:.0%}", test, "holds",
            "≈ the predicted power", holds(weak), runs, predicted, near_prediction(0.05)),
        Row("no trend, same noise", test, "holds", f"≤ {lt.ALPHA:.0%} (its level)", holds(flat),
            runs, check=at_most(lt.ALPHA)),
    ]  # fmt: skip


def bracket_midpoint(value: float, grid=(32, 64, 128, 256), ratio: float = 1.1) -> float:
    """A seed's fitted_T measured as the protocol measures it (memcap.synthetic.series): the
    grid doubled while its largest T fits, then bisected by ``between`` until a fitted T and
    an unfitted one are ``ratio`` apart; the bracket's geometric midpoint (what the laws take).
    Every T up to ``value`` fits, none above."""
    from memcap.synthetic.series import between

    tried = set(grid)
    while max(tried) <= value:
        tried.add(2 * max(tried))
    while True:
        low = max((T for T in tried if value >= T), default=0)
        high = min(T for T in tried if low < T)
        mid = between(low, high, ratio)
        if mid is None:
            return 0.0 if low == 0 else float(np.sqrt(low * high))
        tried.add(mid)


def bracket_rows(runs: int = 400) -> list[Row]:
    """The laws decided on bracket midpoints (ratio 1.1) of fitted_T keep their level: the
    lack-of-fit F on a line, the trend test on a flat truth, and the stop verdict of "grows
    with d_h up to n" on a step of exactly +10% (the margin) into n."""
    rng = np.random.default_rng(6)
    line, flat = 45.0 * H, np.full(len(H), 150.0)

    def measured(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = _seeds(means, CV * means, SEEDS, rng)
        return x, np.array([bracket_midpoint(v) for v in y])

    lines = [lt.decide_form(*measured(line), "linear", grows=True, variance="proportional")
             for _ in range(runs)]  # fmt: skip
    flats = [lt.decide_grows(*measured(flat), power=False).outcome for _ in range(runs // 5)]
    stops = []
    for _ in range(runs):
        at_4 = 150.0 * (1 + CV * rng.normal(size=SEEDS))
        at_8 = at_4 * (1 + lt.MARGIN + STEP_SD * rng.normal(size=SEEDS))
        table = pd.DataFrame({4.0: [bracket_midpoint(v) for v in at_4],
                              8.0: [bracket_midpoint(v) for v in at_8]})  # fmt: skip
        stops.append("stop measured" if lt.steps(table)[0].below(lt.MARGIN)[1] < lt.ALPHA
                     else "not")  # fmt: skip
    truth = f"fitted_T as bracket midpoints (ratio 1.1) of a line 45·H, seed SD {CV:.0%}"
    return [
        Row(truth, "lack-of-fit F, 1/mean² weights", "fails", f"fails ≤ {lt.FAIL_P:.0%}",
            _rates([r.outcome for r in lines]), runs, check=at_most(lt.FAIL_P)),
        Row(truth, "lack-of-fit F, 1/mean² weights", "p < 0.05", "≤ 5% (its level)",
            _rates(["p < 0.05" if r.p_value < lt.HOLD_P else "p ≥ 0.05" for r in lines]), runs,
            check=at_most(lt.HOLD_P)),
        Row("the same of a flat truth 150", "Jonckheere–Terpstra", "holds",
            f"≤ {lt.ALPHA:.0%} (its level)", _rates(flats), len(flats), check=at_most(lt.ALPHA)),
        Row(f"a step of +{lt.MARGIN:.0%} (the margin) into n, bracket midpoints",
            "step below the margin (stops before n)", "stop measured",
            f"≤ {lt.ALPHA:.0%} (its level)", _rates(stops), runs, check=at_most(lt.ALPHA)),
    ]  # fmt: skip


CENSORED = 0.25  # the share of seeds that are lower bounds (the heads sweep's random curve: 6/25)


def _censor(values: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """A quarter of the seeds observed as lower bounds: their value times U(0.6, 1), flagged."""
    lower = rng.random(values.shape) < CENSORED
    return np.where(lower, values * rng.uniform(0.6, 1.0, values.shape), values), lower


def censored_rows(runs: int = 200) -> list[Row]:
    """The laws with a quarter of the seeds right-censored (memcap.laws.censored) keep their
    level: the lack-of-fit F on a line (beside it the same seeds taken as values), the trend on
    a flat truth, the step into n at no step, and no gain beyond n at a gain of the margin."""
    rng = np.random.default_rng(7)
    line, flat = 45.0 * H, np.full(len(H), 150.0)
    censored, as_values, flats, ups, gains = [], [], [], [], []
    for _ in range(runs):
        x, y = _seeds(line, CV * line, SEEDS, rng)
        y, lower = _censor(y, rng)
        censored.append(lt.decide_form(x, y, "linear", grows=True, variance="proportional",
                                       lower=lower))  # fmt: skip
        as_values.append(lt.decide_form(x, y, "linear", grows=True, variance="proportional"))
        x, y = _seeds(flat, CV * flat, SEEDS, rng)
        y, lower = _censor(y, rng)
        if len(flats) < runs // 4:
            flats.append(lt.decide_grows(x, y, power=False, lower=lower).outcome)
        at_4 = 150.0 * (1 + CV * rng.normal(size=SEEDS))
        at_8 = at_4 * (1 + STEP_SD * rng.normal(size=SEEDS))
        (at_4, low_4), (at_8, low_8) = _censor(at_4, rng), _censor(at_8, rng)
        table = pd.DataFrame({4.0: at_4, 8.0: at_8})
        flags = pd.DataFrame({4.0: low_4, 8.0: low_8})
        ups.append("step significant" if lt.steps(table, flags)[0].p_up < lt.ALPHA else "not")
        reference, reference_low = _censor(180.0 * (1 + CV * rng.normal(size=SEEDS)), rng)
        others, marks = {}, {}
        for d_h in (12.0, 16.0):
            gained = reference * (1 + lt.MARGIN + GAIN_SD * rng.normal(size=SEEDS))
            others[d_h], marks[d_h] = _censor(gained, rng)
        gains.append(lt.decide_saturates(reference, others, lower=(reference_low, marks)).outcome)
    share = f"{CENSORED:.0%} of seeds lower bounds (× U(0.6, 1))"
    truth = f"a line 45·H, seed SD {CV:.0%}, {share}"
    test = "lack-of-fit F, 1/mean² weights"

    def p_rates(results: list[lt.LawTest]) -> dict[str, float]:
        return _rates(["p < 0.05" if r.p_value < lt.HOLD_P else "p ≥ 0.05" for r in results])

    return [
        Row(truth, f"{test}, censored likelihood", "p < 0.05", "≤ 5% (its level)",
            p_rates(censored), runs, check=at_most(lt.HOLD_P)),
        Row(truth, f"{test}, the lower bounds taken as values", "p < 0.05", "reported beside it",
            p_rates(as_values), runs),
        Row(f"a flat truth 150, {share}", "Jonckheere–Terpstra, Gehan's scores", "holds",
            f"≤ {lt.ALPHA:.0%} (its level)", _rates(flats), len(flats), check=at_most(lt.ALPHA)),
        Row(f"no step into n, {share}", "paired step t, censored likelihood",
            "step significant", f"≤ {lt.ALPHA:.0%} (its level)", _rates(ups), runs,
            check=at_most(lt.ALPHA)),
        Row(f"a gain of +{lt.MARGIN:.0%} (the margin) at d_h = 12, 16, {share}",
            f"non-superiority t at +{lt.MARGIN:.0%}, censored likelihood", "holds",
            f"holds ≤ {lt.ALPHA:.0%} (its level)", _rates(gains), runs, check=at_most(lt.ALPHA)),
    ]  # fmt: skip


def rows() -> list[Row]:
    return (
        form_rows() + saturation_rows() + step_rows() + equivalence_rows() + trend_rows()
        + bracket_rows() + censored_rows()
    )  # fmt: skip


def markdown(table: list[Row]) -> str:
    head = (
        "| simulated truth | test | required | measured | predicted power |\n|---|---|---|---|---|"
    )
    return "\n".join([BEGIN, head, *(row.markdown() for row in table), END])


def write_docs(table: list[Row], path: Path = DOCS) -> None:
    text = path.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    path.write_text(text[:start] + markdown(table) + text[end:])


if __name__ == "__main__":
    write_docs(rows(), Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
