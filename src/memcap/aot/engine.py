"""Paper B's fast training step: a one-layer :class:`~memcap.aot.model.ReplicaTransformer`
through token tables and merged heads, one route per batch shape.

Each call takes the route of its shape, chosen at the first call of that shape (per batched
model: a sweep builds one step per model) and logged once; nothing in the step looks at
the tokens to choose:

- ``table``: the logits of all N^S input sequences from token tables
  (:mod:`memcap.aot.tables`), each example's row gathered by its sequence. Taken where the
  table has at most a quarter as many rows as the call (B ≥ 4·N^S), and by a full pass over
  the inputs (B = N^S: an evaluation or a full batch; not a mini-batch, whose rows repeat);
- ``one node``: a classification mini-batch with S ≥ 2 in float32, embedding to loss as one
  node with its backward written out (:mod:`memcap.aot.step`): called directly, without the
  autograd engine (:func:`direct_step`), or as an autograd function under ``compile``;
- ``merged``: any other call, per example through merged heads (:mod:`memcap.aot.merged`) and
  autograd (bfloat16 copies, the distribution task, S = 1, evaluations).

Which models it computes is checked, not assumed: :func:`memcap.training.engine.choose_step`
compares it with the model's own forward and autograd on the run's first batch.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn

from memcap.aot.merged import merged_logits
from memcap.aot.model import ReplicaTransformer
from memcap.aot.step import NAMES, MergedStep, step_backward, step_forward
from memcap.aot.tables import table_logits
from memcap.aot.tasks import all_sequences, sequence_index
from memcap.training.config import TrainConfig
from memcap.training.engine import AutogradStep
from memcap.training.objectives import ExampleLoss, Objective, example_losses, widened

_logger = logging.getLogger(__name__)

TABLE, ONE_NODE, DIRECT, MERGED = "table", "one node", "one node, without autograd", "merged"


def route(
    rows: int, table_rows: int, mini_batch: bool, one_node: bool, direct: bool = False
) -> str:
    """The route of a call on ``rows`` examples per replica over a table of ``table_rows``
    (N^S) inputs: :data:`TABLE`, :data:`DIRECT`, :data:`ONE_NODE` or :data:`MERGED`.

    Args:
        mini_batch: a training step on a drawn mini-batch (False: an evaluation or a full
            batch, which reads each input once).
        one_node: the one-node step computes this call (a classification training step with
            S ≥ 2 in float32).
        direct: the one node runs without autograd (the step is not compiled).
    """
    if rows >= 4 * table_rows or (rows == table_rows and not mini_batch):
        return TABLE
    if one_node:
        return DIRECT if direct else ONE_NODE
    return MERGED


class FastStep(AutogradStep):
    """Token tables, merged heads and the one-node step of a one-layer model."""

    name = "fast"

    def __init__(self, cfg: TrainConfig, device: torch.device) -> None:
        super().__init__(cfg, device)
        self._mini_batches = cfg.batch_size is not None
        self._float32 = cfg.precision != "bf16"
        self._direct = not cfg.compile
        self._routes: dict[tuple[bool, int], str] = {}  # (training step, rows) -> route
        self._sequences: dict[tuple, Tensor] = {}  # all N^S input sequences, per (N, S, device)

    @staticmethod
    def unsupported(model: nn.Module, objective: Objective, cfg: TrainConfig) -> str | None:
        if not isinstance(model, ReplicaTransformer):
            return f"{type(model).__name__} is no ReplicaTransformer, the model it is derived for"
        if model.depth != 1:
            return f"{model.depth} layers: the token tables and merged heads cover one"
        return None

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        (tokens,) = inputs
        if self._route(model, tokens, None) == TABLE:
            return self._table_rows(model, tokens)
        return merged_logits(model, tokens)

    def __call__(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        (tokens,) = inputs
        if self._route(model, tokens, objective) == DIRECT:
            return direct_step(model, tokens, targets, weights)
        return super().__call__(model, inputs, targets, weights, objective)

    def loss(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        """Per-replica weighted loss (R,) and outputs of a training step on its route."""
        (tokens,) = inputs
        chosen = self._route(model, tokens, objective)
        if chosen in (ONE_NODE, DIRECT):
            loss = ExampleLoss(targets, weights, classification=True)
            w = model.weights()
            per_replica, logits = MergedStep.apply(
                tokens, model.scale, loss, model.N, *(w.get(name) for name in NAMES)
            )
            return per_replica, logits.transpose(1, 2)
        rows_of = self._table_rows if chosen == TABLE else merged_logits
        outputs = widened(rows_of(model, tokens))
        return (example_losses(outputs, targets, objective) * weights).sum(1), outputs

    def _route(self, model: ReplicaTransformer, tokens: Tensor, objective: Objective | None) -> str:
        """The route of a call on ``tokens`` (R, B, S); ``objective``: a training step's (None:
        an evaluation). Chosen once per kind of call and batch size, and logged."""
        key = (objective is not None, tokens.shape[1])
        chosen = self._routes.get(key)
        if chosen is None:
            training = objective is not None
            one_node = training and objective == "classification" and model.S >= 2
            mini_batch = training and self._mini_batches
            chosen = route(
                key[1], model.N**model.S, mini_batch, one_node and self._float32, self._direct
            )
            self._routes[key] = chosen
            what = "mini-batches" if mini_batch else "full batches" if training else "evaluations"
            _logger.info(
                "paper B's fast step: %s of %d examples per replica (N^S = %d) through %s",
                what,
                key[1],
                model.N**model.S,
                "the token table" if chosen == TABLE else f"merged heads ({chosen})",
            )
        return chosen

    def _table_rows(self, model: ReplicaTransformer, tokens: Tensor) -> Tensor:
        """Logits (R, B, N) of ``tokens`` as rows of the table of every input's logits."""
        key = (model.N, model.S, tokens.device)
        if key not in self._sequences:
            self._sequences[key] = all_sequences(model.N, model.S, tokens.device)
        table = table_logits(model, self._sequences[key])  # (R, N^S, N)
        rows = sequence_index(tokens, model.N)[..., None].expand(-1, -1, model.N)
        return torch.gather(table, 1, rows)


@torch.no_grad()
def direct_step(
    model: ReplicaTransformer, tokens: Tensor, targets: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor]:
    """The one-node step without the autograd engine: per-replica weighted cross-entropy (R,)
    and logits (R, B, N) of ``tokens`` (R, B, S); sets every parameter's ``grad`` (that of the
    summed loss) through the masks of padded entries, as autograd would.

    The autograd engine, one gradient accumulation per parameter and the recorded masking
    products of ``ReplicaTransformer.weights`` are a noticeable part of a small model's step.
    """
    w = model.weights()
    loss = ExampleLoss(targets, weights, classification=True)
    per_replica, logits, saved = step_forward(
        tokens, model.scale, loss, model.N, [w.get(name) for name in NAMES]
    )
    grads = dict(zip(NAMES, step_backward(saved, torch.ones_like(per_replica)), strict=True))
    for name, param in model.named_parameters():
        grad = grads.get(name)  # the key bias cancels in the softmax: no gradient, as autograd
        if grad is None:
            continue
        mask = model.mask(name)
        param.grad = (grad if mask is None else grad * mask).contiguous()
    return per_replica, logits.transpose(1, 2)
