"""A fast step checked against the model's own forward and autograd on a run's first batch.

:func:`memcap.training.engine.choose_step` hands the loop a fast step on probation
(:class:`~memcap.training.engine.CheckedStep`). Before the first training step,
:func:`verified` computes, with the fast step and with the reference step, the outputs, the
per-replica loss and every parameter's gradient on the batch the first step will draw, and
the outputs on the first chunk the first evaluation reads. The run is left as it was: the
batch streams are peeked at, not advanced; no random numbers are drawn; the gradients are
cleared afterwards (the first step starts from none anyway); the float64 copy is the
check's own. It runs eagerly before any step, so never inside a CUDA-graph capture. The fast
step is kept only where every tensor agrees; otherwise the run trains through the reference
and one log line names the tensor that differs. The choice rests on what the model
computes, so a subclass, or an edited ``forward``, is checked like the class the step was
derived for.

**What is compared, and the tolerance.** The question is what the fast step computes, not how
it rounds, so the fast step runs in float64 (on a float64 copy of the step's model and
inputs, along the route the run takes) beside the reference in float64; rounding then sits
near 10⁻¹⁶ while a different function differs by whatever it changes. The tolerance of each
tensor X is the reference's own rounding at the run's precision (float32, or bfloat16 on the
rounded copy), measured on the same batch:

    ‖X_fast,64 − X_ref,64‖ ≤ ‖X_ref − X_ref,64‖ + u · ‖X_ref,64‖,

u the unit roundoff of the run's arithmetic (2⁻²⁴ float32, 2⁻⁸ bfloat16). A tensor of a few
elements (the loss, a bias's gradient) measures that rounding noisily: its ‖X_ref − X_ref,64‖
is raised to at least the reference's median relative error over the tensors it rounds,
times ‖X_ref,64‖. Same-function differences sit at most at 3·10⁻⁸ of the tolerance (144
configurations of both engines: every route, both precisions, objectives, full and
mini-batches, padded replicas; paper A's full batches up to T = 4,096, where it grows as √T;
``tests/training/test_training_verify_step.py`` keeps a margin of 10⁴); a residual connection
sits at 10⁵ times it. A change smaller than the reference's own rounding at the run's
precision passes unnoticed. The check computes at most :data:`CHECK_ROWS` replica-examples
per tensor (the first examples of every replica).
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from memcap.training.active import ActiveReplicas
from memcap.training.config import TrainConfig
from memcap.training.engine import CheckedStep, ReferenceStep, Step
from memcap.training.evaluation import chunks
from memcap.training.objectives import Objective

_logger = logging.getLogger(__name__)

# Replica-examples the check computes at most per tensor: its cost (the reference's forward
# in float32 and float64) and memory. A route of paper B's fast step that the first
# evaluation chunk takes is kept by its first 2^11 / R examples in the default runs.
CHECK_ROWS = 2**11

Tensors = dict[str, Tensor]


@dataclass(frozen=True)
class Discrepancy:
    """How far one tensor of the fast step (in float64) sits from the reference's."""

    tensor: str  # what was compared: "outputs", "loss", "gradient of <parameter>", ...
    error: float  # ‖fast − reference‖, both in float64
    tolerance: float  # the reference's own rounding at the run's precision (see the module)
    max_abs: float  # max |fast − reference|
    max_rel: float  # max_abs / max |reference|

    @property
    def ratio(self) -> float:
        """error / tolerance: at most 1 where the fast step passes."""
        if self.tolerance > 0:
            return self.error / self.tolerance
        return 0.0 if self.error == 0 else float("inf")


def discrepancies(
    fast: Tensors, working: Tensors, exact: Tensors, unit: float
) -> list[Discrepancy]:
    """Every tensor's :class:`Discrepancy`: ``fast`` and ``exact`` (the reference) in float64,
    ``working`` the reference at the run's precision, whose unit roundoff is ``unit`` (same
    keys in the three)."""
    rounding = {}
    for name, truth in exact.items():
        scale = float(torch.linalg.vector_norm(truth))
        own = float(torch.linalg.vector_norm(working[name].double() - truth))
        rounding[name] = (own, scale)
    relative = [e / s for e, s in rounding.values() if e > 0 and s > 0]
    typical = float(torch.tensor(relative).median()) if relative else 0.0
    found = []
    for name, truth in exact.items():
        gap = fast[name].double() - truth
        own, scale = rounding[name]
        max_abs = float(gap.abs().max()) if gap.numel() else 0.0
        largest = float(truth.abs().max()) if truth.numel() else 0.0
        found.append(
            Discrepancy(
                tensor=name,
                error=float(torch.linalg.vector_norm(gap)),
                tolerance=max(own, typical * scale) + unit * scale,
                max_abs=max_abs,
                max_rel=max_abs / largest if largest > 0 else float(max_abs > 0),
            )
        )
    return found


def verified(
    step: CheckedStep, active: ActiveReplicas, objective: Objective, cfg: TrainConfig
) -> Step:
    """The step ``step`` keeps after its check (set as ``step.chosen``): its fast step where
    it computes what the reference does on the first batch and evaluation chunk, else the
    reference. Logged either way, with the worst tensor and the check's CPU seconds."""
    if step.chosen is not None:
        return step.chosen
    start = time.process_time()
    found, rows = _compare(step.fast, active, objective, cfg)
    worst = max(found, key=lambda d: d.ratio)
    seconds = time.process_time() - start
    if worst.ratio <= 1.0:
        step.chosen = step.fast
        _logger.info(
            "%s step checked against the reference on the first batch (%s): worst %s at %.2g "
            "of its tolerance (%.3f s CPU)",
            step.fast.name,
            rows,
            worst.tensor,
            worst.ratio,
            seconds,
        )
    else:
        step.chosen = step.reference
        _logger.warning(
            "%s step differs from the reference on the first batch (%s): %s off by up to %.3g "
            "(relative %.3g; in norm %.3g against a tolerance of %.3g): training through the "
            "reference step",
            step.fast.name,
            rows,
            worst.tensor,
            worst.max_abs,
            worst.max_rel,
            worst.error,
            worst.tolerance,
        )
    return step.chosen


def _compare(
    fast: Step, active: ActiveReplicas, objective: Objective, cfg: TrainConfig
) -> tuple[list[Discrepancy], str]:
    """Discrepancies of the first batch's step and of the first evaluation chunk's outputs,
    and what they covered."""
    reference = ReferenceStep(replace(cfg, compile=False), active.index.device)
    inputs, targets, weights = _first(*active.take(active.peek(), cfg.batch_size))
    model = active.step_model
    if active.compute is not None:  # bfloat16: the step runs on the rounded copy
        active.compute.pull()
        inputs = active.compute.inputs(inputs)
    wide = _float64(model)
    batch = (_as_float64(inputs), *_as_float64((targets, weights)))
    exact = _step(reference, wide, *batch, objective)
    ours = _step(fast, wide, *batch, objective)
    working = _step(reference, model, inputs, targets, weights, objective)
    evaluated = _first(*next(chunks(active.data))[0])
    with torch.no_grad():
        if model is not active.model:  # the evaluations read the float32 master weights
            wide = _float64(active.model)
        wide_inputs = _as_float64(evaluated)
        exact["evaluation outputs"] = reference.outputs(wide, wide_inputs)
        ours["evaluation outputs"] = fast.outputs(wide, wide_inputs)
        working["evaluation outputs"] = reference.outputs(active.model, evaluated)
    R, B = targets.shape[:2]
    covered = f"{R} replicas x {B} examples, evaluation {evaluated[0].shape[1]}"
    return discrepancies(ours, working, exact, _unit(model)), covered


def _step(
    step: Step,
    model: nn.Module,
    inputs: tuple[Tensor, ...],
    targets: Tensor,
    weights: Tensor,
    objective: Objective,
) -> Tensors:
    """A step's loss, outputs and every gradient; the gradients are reset afterwards."""
    for p in model.parameters():
        p.grad = None
    loss, outputs = step(model, inputs, targets, weights, objective)
    return {"loss": loss, "outputs": outputs, **_gradients(model)}


def _gradients(model: nn.Module) -> Tensors:
    """Every parameter's gradient (zeros where it has none), taken off the parameter."""
    out = {}
    for name, p in model.named_parameters():
        out[f"gradient of {name}"] = torch.zeros_like(p) if p.grad is None else p.grad
        p.grad = None
    return out


def _first(*tensors: Tensor | tuple[Tensor, ...]) -> tuple:
    """The first examples of every replica (axis 1), at most :data:`CHECK_ROWS` in all."""
    rows = max(1, CHECK_ROWS // int(_leaves(tensors)[0].shape[0]))
    return tuple(
        tuple(x[:, :rows] for x in t) if isinstance(t, tuple) else t[:, :rows] for t in tensors
    )


def _leaves(tensors: tuple) -> list[Tensor]:
    return [x for t in tensors for x in (t if isinstance(t, tuple) else (t,))]


def _float64(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).double()


def _as_float64(tensors: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(x.double() if x.is_floating_point() else x for x in tensors)


def _unit(model: nn.Module) -> float:
    """Unit roundoff of the model's parameters' dtype."""
    return torch.finfo(next(model.parameters()).dtype).eps / 2
