"""Which replicas share a batched model: a cost model of the training step and buckets.

A batched model pads every replica to its largest H, n, d_h, step batch and T, so a replica
pays for the padded shape. :class:`StepCost` counts the floating-point work of one training
step of :class:`~memcap.synthetic.model.ReplicaMHA` (its folded forward) at a given shape; a
bucket's *padded* cost is its size times the cost at the bucket's elementwise-largest shape,
its *own* cost the sum over its replicas, and its padding the ratio of the two minus one.
Each batched model also costs a fixed amount per step (kernel launches, Python, Adam's
per-tensor work), which makes fewer models cheaper: :func:`bucket_replicas` makes as few as
keep every one's padding under a bound. No torch here: the Snakefile's config checks may
import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepShape:
    """What one replica's training step works on."""

    H: int  # heads
    n: int  # context size
    d_h: int  # query/key dimension per head
    batch: int  # examples per step (T in full-batch training)
    T: int  # dataset size, every example evaluated every eval_every steps

    def padded_with(self, other: StepShape) -> StepShape:
        """The elementwise-largest shape of the two."""
        return StepShape(
            max(self.H, other.H),
            max(self.n, other.n),
            max(self.d_h, other.d_h),
            max(self.batch, other.batch),
            max(self.T, other.T),
        )


@dataclass(frozen=True)
class StepCost:
    """Floating-point operations of one training step of one replica, averaged over steps.

    Per example, forward (``ReplicaMHA.forward``): the query's map to every head's scores,
    2·d·H(d + n); scores against the n context rows, 2·H·n·d; values of every context row,
    2·H·d_v·n·d; the softmax-weighted mix, 2·H·n·d_v; the readout, 2·H·d_v·C. Per step and
    replica, the weight products: W_q W_kᵀ (2·H·d·d_h·d), the folded score maps
    (2·H·d·d·(d + n) twice), value maps (2·(d + n)·d·H·d_v) and readout (2·(H d_v + 1)·d·C).
    The backward costs twice the forward (×3 in all); an evaluation runs the forward on T
    examples every ``eval_every`` steps. d_h enters only the per-step weight products: a
    padded head dimension is nearly free, a padded head or context position is not.

    Attributes:
        d: token dimension.
        d_v: d_v per head.
        outputs: C classes, 1 for regression.
        eval_every: steps between evaluations.
    """

    d: int
    d_v: int
    outputs: int
    eval_every: int

    def per_example(self, shape: StepShape) -> float:
        """Forward FLOPs of one example."""
        d, d_v, h, n = self.d, self.d_v, shape.H, shape.n
        return 2.0 * h * (d * (d + n) + n * d + d_v * n * d + n * d_v + d_v * self.outputs)

    def per_step_weights(self, shape: StepShape) -> float:
        """Forward FLOPs of the example-free weight products of one step."""
        d, d_v, h, n = self.d, self.d_v, shape.H, shape.n
        fold = h * d * shape.d_h * d + 2 * h * d * d * (d + n) + (d + n) * d * h * d_v
        return 2.0 * (fold + (h * d_v + 1) * d * self.outputs)

    def flops(self, shape: StepShape) -> float:
        """FLOPs per training step of one replica of ``shape`` (evaluations averaged in)."""
        train = 3.0 * (shape.batch * self.per_example(shape) + self.per_step_weights(shape))
        return train + shape.T * self.per_example(shape) / self.eval_every

    def needed(self, shape: StepShape) -> float:
        """FLOPs the model itself needs per training step, in its plain form and whatever the
        implementation: 3·B·[H·(4·d·d_h + 4·n·d + 4·d·d_v) + 2·d·C] (query projection, q·W_k,
        scores, weighted context, value and output projections, decoder; ×3 for the
        backward; ``benchmarks/bench_synthetic_step.py`` counts the same)."""
        d, d_v, h, n = self.d, self.d_v, shape.H, shape.n
        per_example = h * (4 * d * shape.d_h + 4 * n * d + 4 * d * d_v) + 2 * d * self.outputs
        return 3.0 * shape.batch * per_example

    def bucket(self, shapes: Sequence[StepShape]) -> tuple[float, float]:
        """(padded, own) FLOPs per step of one batched model of ``shapes``."""
        largest = shapes[0]
        for shape in shapes[1:]:
            largest = largest.padded_with(shape)
        return len(shapes) * self.flops(largest), sum(self.flops(s) for s in shapes)

    def padding(self, shapes: Sequence[StepShape]) -> float:
        """Padded over own FLOPs of one batched model, minus one (0: no padding)."""
        padded, own = self.bucket(shapes)
        return padded / own - 1.0


def bucket_replicas(
    shapes: Sequence[StepShape], cost: StepCost, max_padding: float
) -> list[list[int]]:
    """Split replicas into batched models whose padding stays at most ``max_padding``.

    First-fit decreasing: replicas in order of decreasing cost, each into the first model
    that stays within the bound with it, else into a new one. Each model's largest replica
    comes first, and in one dimension (a sweep varies one parameter) adding a smaller replica
    only raises a model's padding, so each model takes as many as the bound allows.

    Returns:
        Lists of positions in ``shapes``, each increasing; models in order of creation.
    """
    if max_padding < 0:
        raise ValueError(f"max_padding must be non-negative, got {max_padding}")
    order = sorted(range(len(shapes)), key=lambda i: (-cost.flops(shapes[i]), i))
    models: list[list[int]] = []
    for i in order:
        for members in models:
            if cost.padding([shapes[j] for j in [*members, i]]) <= max_padding + 1e-12:
                members.append(i)
                break
        else:
            models.append([i])
    return [sorted(members) for members in models]


def plan_cost(
    shapes: Sequence[StepShape],
    models: Sequence[Sequence[int]],
    cost: StepCost,
    model_overhead: float = 0.0,
) -> dict[str, float]:
    """Padded and own FLOPs per step of a split into ``models``, and its total cost with a
    fixed ``model_overhead`` (FLOP-equivalents per model and step)."""
    padded = own = 0.0
    for members in models:
        p, o = cost.bucket([shapes[i] for i in members])
        padded, own = padded + p, own + o
    return {
        "models": len(models),
        "padded_flops": padded,
        "own_flops": own,
        "padding": padded / own - 1.0,
        "cost": padded + len(models) * model_overhead,
    }
