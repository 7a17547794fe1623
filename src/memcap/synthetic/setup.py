"""This run's synthetic setup beside paper A's (Section 5.2 and its code): the table that opens
the report's paper A section, and one sentence on what the difference means for the laws.

Paper A's values are those of its published code as ../shared/SCIENCE.md records them and
configs/paper.yaml reproduces them; this run's are read from the validated ``synthetic``
section, per sweep where a sweep sets its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from memcap.synthetic.series import RISE
from memcap.synthetic.settings import SWEPT, sweep_names, sweep_spec

PAPER_D, PAPER_CLASSES = 64, 100
PAPER_A = {
    "d (token dimension)": "64",
    "H (heads)": "H sweep: 1–60; n sweep: 20; d_h sweep: 30",
    "n (context size)": "H sweep: 32; n sweep: 1–60; d_h sweep: 32",
    "d_h (query/key dimension per head)": "H sweep: 64; n sweep: 64; d_h sweep: 10–64",
    "d_v (value dimension per head)": "1",
    "classes": "100",
    "contexts, tasks": "shared and random; classification (regression in the text)",
    "optimizer": "Adam, lr 1e-3, warm-up 5% from 0.01·lr, cosine to 0; best-loss state",
    "steps": "max(500·T/256, 50,000); 300,000 for the d_h sweep",
    "batch": "256",
    "seeds per setting": "1",
    "T grid": "tens of thousands (configs/paper.yaml: 10,000–40,000)",
    "capacity (the laws' notion)": "the most examples memorized at any T tried (its figures)",
}


def setup_table(section: Mapping[str, Any]) -> pd.DataFrame:
    """One row per setting of the experiment: paper A's value and this run's."""
    specs = [sweep_spec(section, name) for name in sweep_names(section)]
    ladder = section["ladder"]
    ours = {
        "d (token dimension)": str(section["d"]),
        "H (heads)": _per_sweep(specs, "H"),
        "n (context size)": _per_sweep(specs, "n"),
        "d_h (query/key dimension per head)": _per_sweep(specs, "d_h"),
        "d_v (value dimension per head)": str(section["value_dim"]),
        "classes": str(section["classes"]),
        "contexts, tasks": "; ".join(
            f"{SWEPT[s.name]} sweep: {', '.join(s.contexts)}, {', '.join(s.tasks)}" for s in specs
        ),
        "optimizer": "; ".join(sorted({_optimizer(section, s) for s in specs})),
        "steps": _joined({SWEPT[s.name]: _steps(section, s) for s in specs}),
        "batch": "; ".join(sorted({_batch(section, s) for s in specs})),
        "seeds per setting": _joined({SWEPT[s.name]: str(s.seeds) for s in specs}),
        "T grid": "; ".join(
            f"{SWEPT[s.name]} sweep: {', '.join(f'{t:,}' for t in s.T)}" for s in specs
        )
        + _growth(ladder),
        "capacity (the laws' notion)": _notion(ladder),
    }
    return pd.DataFrame(
        {"setting": list(PAPER_A), "paper A": list(PAPER_A.values()),
         "this run": [ours[key] for key in PAPER_A]}
    )  # fmt: skip


def setup_sentence(section: Mapping[str, Any]) -> str:
    """What the difference in setup means for the laws, in one sentence."""
    specs = [sweep_spec(section, name) for name in sweep_names(section)]
    recipes = {s.recipe for s in specs}
    steps = _joined({SWEPT[s.name]: _steps(section, s) for s in specs})
    batch = "; ".join(sorted({_batch(section, s) for s in specs}))
    optimizer = (
        "paper A's own recipe" if recipes == {"authors"} else f"another recipe ({steps}; {batch})"
    )
    paper = (section["d"], section["classes"]) == (PAPER_D, PAPER_CLASSES)
    sizes = "at paper A's d and classes" if paper else "at smaller sizes"
    return (
        f"The laws are paper A's statements tested {sizes} (d = {section['d']}, "
        f"{section['classes']} classes) with {optimizer}: every capacity is a lower bound by "
        "this recipe, so a law that holds says this recipe's counts follow it at these sizes, "
        "not that paper A's numbers are reproduced, and a law that fails may fail for the "
        "optimizer rather than the layer (the convergence column says where the budget limits)."
    )


def _joined(per_sweep: Mapping[str, str]) -> str:
    """One value where every sweep has it, else each sweep's."""
    if len(set(per_sweep.values())) == 1:
        return next(iter(per_sweep.values()))
    return "; ".join(f"{swept} sweep: {value}" for swept, value in per_sweep.items())


def _per_sweep(specs: list, key: str) -> str:
    parts = []
    for s in specs:
        swept = SWEPT[s.name]
        value = f"{min(s.values)}–{max(s.values)}" if swept == key else str(getattr(s, key))
        parts.append(f"{swept} sweep: {value}")
    return "; ".join(parts)


def _train(section: Mapping[str, Any], spec) -> dict[str, Any]:
    base = section["authors"] if spec.recipe == "authors" else section["train"]
    return {**base, **{k: v for k, v in spec.train.items() if v is not None}}


def _optimizer(section: Mapping[str, Any], spec) -> str:
    train = _train(section, spec)
    if spec.recipe == "authors":
        return f"paper A's code: Adam, lr {train['lr']:g}, warm-up, cosine to 0; best-loss state"
    schedule = train.get("schedule", "cosine")
    warmup = train.get("warmup_frac", 0.0)
    return (
        f"Adam, lr {train['lr']:g}, warm-up {warmup:.0%}, {schedule}; the state with most "
        "examples memorized"
    )


def _steps(section: Mapping[str, Any], spec) -> str:
    train = _train(section, spec)
    if spec.recipe == "authors":
        steps = f"max({train['epochs']}·T/{train['batch_size']}, {train['steps']:,})"
    else:
        steps = f"{train['steps']:,}"
    factor = section["convergence"]["factor"] or 0
    return f"{steps} steps" + (f", checked at {factor}×" if factor > 1 else "")


def _batch(section: Mapping[str, Any], spec) -> str:
    size = _train(section, spec).get("batch_size")
    return "full batch" if size is None else f"batches of {size}"


def _growth(ladder: Mapping[str, Any]) -> str:
    if ladder.get("grow_at") is None:
        return ""
    rising = (
        f" or the count above chance still rises {RISE:.0%}" if ladder.get("past_maximum") else ""
    )
    return (
        f"; then ×{ladder['factor']:g} while {ladder['grow_at']:.0%} of the largest T is "
        f"memorized{rising}, up to {ladder['max_T']:,}"
    )


def _notion(ladder: Mapping[str, Any]) -> str:
    if ladder.get("bracket") is None:
        return "the most examples memorized at any T tried (fitted_T bracketed by the grid only)"
    return (
        f"fitted_T, the largest T fitted exactly (Theorem 1's), bisected to "
        f"{ladder['bracket']:g}×; the most memorized shown beside it"
    )
