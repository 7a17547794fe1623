"""The walk of every series up its T grid: which replicas train in which pass, warm starts.

A *series* is one setting (sweep value, context, task) and replicate seed; its replicas are its
dataset sizes T, whose datasets are nested (the first T examples of one draw). Without growth
or warm starts the whole listed grid trains in one pass, grouped as the engine section says.
Otherwise T trains in increasing order, one pass per T (a *rung*): the listed grid for every
series, then larger T (``ladder.factor`` apart) for the series whose memorized fraction is
still at least ``ladder.grow_at`` (:class:`~memcap.synthetic.settings.Ladder`). With
``warm_start`` a replica
starts from its series' trained state at the previous rung, so the examples that state
memorized are memorized at its first evaluation and the kept (best) state never memorizes
fewer: memorized counts do not fall along T.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

import torch
from torch import Tensor, nn

from memcap.synthetic.settings import Replica, Setting, StageSettings, SweepSpec, grid_replicas

Series = tuple[Setting, int]  # (setting, replicate seed)


def series_of(replica: Replica) -> Series:
    return replica.setting, replica.seed


def passes(
    spec: SweepSpec, stage: StageSettings, memorized: Mapping[tuple[Series, int], int]
) -> Iterator[list[Replica]]:
    """The replicas of each training pass, in order. ``memorized`` maps (series, T) to the
    count of every replica trained so far; the caller fills it between passes."""
    ladder = stage.ladder
    if ladder.grow_at is None and not ladder.warm_start:
        yield grid_replicas(spec, stage)
        return
    series = [(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
    for T in spec.T:
        yield [Replica(s, seed, T) for s, seed in series]
    T = spec.T[-1]
    growing = [s for s in series if ladder.grows(memorized[s, T], T)]
    while growing:
        T = ladder.next_T(T)
        yield [Replica(s, seed, T) for s, seed in growing]
        growing = [s for s in growing if ladder.grows(memorized[s, T], T)]


def first_training(replica: Replica) -> Replica:
    """The key under which a sweep keeps ``replica``'s best training: its first training's."""
    return replace(replica, restart=0, budget=0)


def capacity_replicas(counts: Mapping[Replica, tuple[int, int]]) -> dict[Series, Replica]:
    """Per series, the replica of its capacity (most memorized; the smaller T on a tie) with
    the restart of its kept training (its initialisation). ``counts`` maps every kept replica
    (in increasing T) to (memorized, restart)."""
    best: dict[Series, Replica] = {}
    for replica, (memorized, restart) in counts.items():
        current = best.get(series_of(replica))
        if current is None or memorized > counts[first_training(current)][0]:
            best[series_of(replica)] = replace(replica, restart=restart)
    return best


def median_probes(
    best: Mapping[Series, Replica], counts: Mapping[Replica, tuple[int, int]]
) -> dict[Setting, Replica]:
    """Per setting, the capacity replica of its median seed (the lower median; ties by seed):
    the one the convergence check trains again."""
    by_setting: dict[Setting, list[Replica]] = {}
    for replica in best.values():
        by_setting.setdefault(replica.setting, []).append(replica)
    probes = {}
    for setting, replicas in by_setting.items():
        ranked = sorted(replicas, key=lambda r: (counts[first_training(r)][0], r.seed))
        probes[setting] = ranked[(len(ranked) - 1) // 2]
    return probes


def trained_states(model: nn.Module) -> list[dict[str, Tensor]]:
    """Every replica's parameters (its slice of the batched model), in replica order."""
    parameters = list(model.named_parameters())
    return [
        {name: p[k].detach().clone() for name, p in parameters}
        for k in range(parameters[0][1].shape[0])
    ]


@torch.no_grad()
def warm_start(
    model: nn.Module, members: list[Replica], states: Mapping[Series, dict[str, Tensor]]
) -> list[bool]:
    """Load each member's series state into its slice of ``model``; which members had one.

    A series keeps its shape from rung to rung, and padded entries are zero in both models,
    so copying the slice the two paddings share copies every real entry.
    """
    started = []
    for k, replica in enumerate(members):
        state = states.get(series_of(replica))
        started.append(state is not None)
        if state is None:
            continue
        for name, p in model.named_parameters():
            source = state[name]
            common = tuple(
                slice(0, min(a, b)) for a, b in zip(p.shape[1:], source.shape, strict=True)
            )
            p[k].zero_()
            p[k][common] = source[common]
    return started
