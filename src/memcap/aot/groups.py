"""Which AoT replicas share one batched model, a sweep's axes, and how much memory its
largest batched model needs: the one grouping the training (:mod:`memcap.aot.sweep`), the
cost model (:mod:`memcap.cluster.costs`) and the job's memory request use.

No torch import here: the Snakefile sizes the AoT jobs with :func:`sweep_memory_mb`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memcap.aot.settings import GRID_KEYS, Setting, expand_sweep, sweep_seeds


def x_axis(spec: Mapping[str, Any]) -> str:
    """The plot axis of a sweep: params when models are compared, else the varied key."""
    if "mlp" in spec["models"]:
        return "params"
    order = ("H", "d_h", "d", "N", "S")  # the first varied one is the x axis
    varied = [k for k in order if isinstance(spec[k], list) and len(spec[k]) > 1]
    return varied[0] if varied else "H"


def facet_keys(spec: Mapping[str, Any]) -> list[str]:
    """Other varied keys of a sweep: one curve (and one plot panel) per value."""
    axis = x_axis(spec)
    return [
        k
        for k in GRID_KEYS
        if isinstance(spec[k], list)
        and len(spec[k]) > 1
        and k != axis
        and not (axis == "params" and k == "H")
    ]


def group_replicas(
    replicas: Sequence[tuple[Setting, int]],
    pad: bool,
    split_widths: bool = True,
    apart: Sequence[str] = (),
) -> list[list[tuple[Setting, int]]]:
    """Replicas that can share one batched model, in first-seen order.

    ``split_widths`` keeps MLP widths apart: at full batch, padding a narrow MLP to a wide one
    costs more than a run of its own. Otherwise (mini-batches, where another run's per-step
    overhead weighs more) neighbouring widths share a model while padding adds at most a
    quarter to their MLPs (:func:`width_buckets`). Settings that differ in a key of ``apart``
    (a sweep's facets: :func:`facet_keys`) never share a model: aot_vs_mlp's facet d is the
    residual dimension D, and the merged heads cost D(D + 1) numbers per example, so padding
    d = 7 to 10 costs more than a model of its own.
    """
    keys = [
        (s.task, s.N, s.S, s.depth, s.model, s.variant)
        + (() if pad else s.shape_key())
        + tuple(getattr(s, k) for k in apart)
        for s, _ in replicas
    ]
    widths = [s.width for s, _ in replicas]
    split = split_widths or not pad
    bucket = {w: w for w in widths} if split else width_buckets(widths)
    groups: dict[tuple, list[tuple[Setting, int]]] = {}
    for key, width, replica in zip(keys, widths, replicas, strict=True):
        groups.setdefault(key + (bucket[width],), []).append(replica)
    return list(groups.values())


def width_buckets(widths: Sequence[int], slack: float = 1.25) -> dict[int, int]:
    """Bucket (its narrowest width) of every MLP width: runs of ascending widths whose padding
    to the run's widest costs at most ``slack`` times their own widths (an MLP's cost)."""
    bucket: dict[int, int] = {}
    members: list[int] = []
    for width in sorted(widths):
        if members and (len(members) + 1) * width > slack * (sum(members) + width):
            members = []
        members.append(width)
        bucket[width] = members[0]
    return bucket


def sweep_memory_mb(section: Mapping[str, Any], name: str) -> int:
    """Rough peak memory of one sweep: its largest batched model's activations, shapes padded
    together (the most ``engine.aot.pad_replicas`` groups)."""
    spec = section["sweeps"][name]
    seeds = range(sweep_seeds(spec, section["seeds"]))
    replicas = [(s, seed) for s in expand_sweep(name, spec) for seed in seeds]
    peak = 0
    for members in group_replicas(replicas, True, spec["recipe"] != "authors", facet_keys(spec)):
        settings = [s for s, _ in members]
        first = settings[0]
        H = max(s.H for s in settings)
        width = max(s.width for s in settings)
        d = max(s.d for s in settings)
        per_example = 8 * H * first.S + 6 * (d + first.N) + 4 * width  # floats, with gradients
        peak = max(peak, len(members) * first.T * per_example * 4)
    return 600 + peak // 2**20
