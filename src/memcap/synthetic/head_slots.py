"""Heads of replicas that read identical inputs, stacked as the rows of one per-example product.

In a sweep over H or d_h the replicas of one seed, context kind and T train on the same
examples (datasets are paired), and in full-batch training they read the same tensors. The
per-example products of the training step (every head's scores against an example's n × d
context, and their backward) then need each example's context once, with all those replicas'
real heads as rows: (Σ_r H_r × d)(d × n) in place of one (H_max × d)(d × n) product per
replica. Padded heads disappear and the products grow (21 rows in place of six products of
at most 6 in the default heads sweep), which the CPU BLAS runs faster per FLOP
(``benchmarks/bench_synthetic_step.py`` measures by how much).

A *slot* is one row of a group's stack; groups are padded to the largest stack S.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class HeadSlots:
    """Replicas grouped by identical inputs, and where each real head sits in its group.

    Attributes:
        first: (G,) the replica whose inputs group g reads.
        source: (G·S,) for every slot, the flat head ``r·H_max + h`` it computes; a padded
            slot repeats its group's first head (its result is never read).
        target: (R·H_max,) for every head, its flat slot ``g·S + s``; padded heads point at
            ``G·S``, one past the last slot (a zero column).
        head: (G·S,) ``source`` with padded slots pointing at ``R·H_max``, one past the last
            head (a zero column): gathers the heads' gradients into the slots.
        slots: S, the rows of each group's stack.
        trivial: one group per replica: nothing to stack (padded heads stay, masked).
    """

    first: Tensor
    source: Tensor
    target: Tensor
    head: Tensor
    slots: int
    trivial: bool

    @property
    def groups(self) -> int:
        return int(self.first.shape[0])


def head_slots(query: Tensor, context: Tensor, H: Sequence[int], max_H: int) -> HeadSlots:
    """Group replicas by identical (query, context) inputs (exact equality) and stack their
    real heads; ``H[r]`` real heads of ``max_H`` per replica."""
    members: list[list[int]] = []
    by_fingerprint: dict[bytes, list[int]] = {}  # first example's query → candidate groups
    fingerprints = query[:, 0].float().cpu().numpy()  # numpy has no bfloat16
    for r in range(len(H)):
        candidates = by_fingerprint.setdefault(fingerprints[r].tobytes(), [])
        for g in candidates:
            f = members[g][0]
            if torch.equal(query[r], query[f]) and torch.equal(context[r], context[f]):
                members[g].append(r)
                break
        else:
            candidates.append(len(members))
            members.append([r])
    return _stacked(members, H, max_H, query.device)


def separate_slots(H: Sequence[int], max_H: int, device: torch.device) -> HeadSlots:
    """One group per replica, nothing stacked: what :func:`head_slots` finds for inputs that
    all differ, without reading them (no device-to-host copy)."""
    return _stacked([[r] for r in range(len(H))], H, max_H, device)


def _stacked(
    members: list[list[int]], H: Sequence[int], max_H: int, device: torch.device
) -> HeadSlots:
    """The slots of replica groups ``members`` (each group's real heads stacked)."""
    slots = max(sum(H[r] for r in group) for group in members)
    source, head, target = [], [], [len(members) * slots] * (len(H) * max_H)
    for g, group in enumerate(members):
        own = [r * max_H + h for r in group for h in range(H[r])]
        for s, flat in enumerate(own):
            target[flat] = g * slots + s
        source += own + [own[0]] * (slots - len(own))
        head += own + [len(H) * max_H] * (slots - len(own))
    return HeadSlots(
        first=torch.tensor([group[0] for group in members], device=device),
        source=torch.tensor(source, device=device),
        target=torch.tensor(target, device=device),
        head=torch.tensor(head, device=device),
        slots=slots,
        trivial=len(members) == len(H),
    )


class SlotCache:
    """The last inputs' :class:`HeadSlots` and grouped inputs, reused while the same tensors
    (same objects, unmodified) come back: full-batch training passes one pair every step.

    Args:
        separate: the replicas' inputs are known to differ (training mini-batches, drawn by
            independent streams): every call gets :func:`separate_slots`, found once per head
            count, and the inputs are never read on the host, so a step holds no device
            synchronisation.
    """

    def __init__(self, separate: bool = False) -> None:
        self.separate = separate
        self._key: tuple | None = None
        self._value: tuple[HeadSlots, Tensor, Tensor, Tensor] | None = None
        self._separate: dict[tuple, HeadSlots] = {}

    def get(
        self, query: Tensor, context: Tensor, H: Sequence[int], max_H: int
    ) -> tuple[HeadSlots, Tensor, Tensor, Tensor]:
        """Slots, the groups' queries with a 1 appended (G, B, d + 1), contexts with
        every row's one-hot position appended (G, B, n, d + n), and the groups' raw
        contexts (G, B, n, d), contiguous: the per-example products read them (a strided
        slice of the augmented rows is slower)."""
        if self.separate:
            key = (tuple(H), max_H, query.device)
            if key not in self._separate:
                self._separate[key] = separate_slots(H, max_H, query.device)
            return (self._separate[key], *_grouped_inputs(query, context))
        if self._key is not None and self._value is not None:
            query_ref, context_ref, versions = self._key
            if (
                query_ref() is query
                and context_ref() is context
                and versions == (query._version, context._version)
            ):
                return self._value
        slots = head_slots(query, context, H, max_H)
        shared = slots.groups < query.shape[0]
        queries, contexts = (
            (query[slots.first], context[slots.first]) if shared else (query, context)
        )
        self._key = (weakref.ref(query), weakref.ref(context), (query._version, context._version))
        self._value = (slots, *_grouped_inputs(queries, contexts))
        return self._value


def _grouped_inputs(queries: Tensor, contexts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The groups' queries with a 1 appended, contexts with one-hot positions appended, and
    the raw contexts, contiguous."""
    ones = queries.new_ones(*queries.shape[:2], 1)
    groups, batch, n, _ = contexts.shape
    positions = torch.eye(n, dtype=contexts.dtype, device=contexts.device)
    augmented = torch.cat([contexts, positions.expand(groups, batch, n, n)], -1)
    return torch.cat([queries, ones], -1), augmented, contexts.contiguous()
