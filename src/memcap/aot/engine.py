"""Paper B's fast training step: a one-layer :class:`~memcap.aot.model.ReplicaTransformer`
through token tables and merged heads.

Outputs take one of three routes, chosen by the inputs: every input sequence in table order
(full-batch training, evaluations) through the token tables (:mod:`memcap.aot.tables`); a
mini-batch through merged heads (:mod:`memcap.aot.merged`); a batch at least four times the
N^S table as rows of the table. A classification mini-batch trains as one node with a
hand-written backward (:mod:`memcap.aot.step`), called without autograd
(:mod:`memcap.aot.direct`) unless the step is compiled or runs on a bfloat16 copy. The step
is derived for ``ReplicaTransformer`` with one layer: any other model, a subclass or a
deeper stack, trains through the reference step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memcap.aot.direct import direct_step
from memcap.aot.merged import merged_logits
from memcap.aot.model import ReplicaTransformer
from memcap.aot.step import NAMES, MergedStep
from memcap.aot.tables import table_logits
from memcap.aot.tasks import all_sequences, sequence_index
from memcap.training.config import TrainConfig
from memcap.training.engine import AutogradStep
from memcap.training.fused_loss import ExampleLoss
from memcap.training.objectives import Objective


class FastStep(AutogradStep):
    """Token tables, merged heads and the one-node step of a one-layer model."""

    name = "fast"

    def __init__(self, cfg: TrainConfig, device: torch.device) -> None:
        super().__init__(cfg, device)
        self._direct = not cfg.compile and cfg.precision != "bf16"
        self._sequences: dict[tuple, Tensor] = {}  # every input sequence, per (N, S, device)
        self._row_ids: dict[tuple, Tensor] = {}  # their table rows 0 .. N^S - 1

    @staticmethod
    def unsupported(model: nn.Module, objective: Objective, cfg: TrainConfig) -> str | None:
        if type(model) is not ReplicaTransformer:
            return f"{type(model).__name__} is not ReplicaTransformer, the model it is derived for"
        if model.depth != 1:
            return f"{model.depth} layers: the token tables and merged heads cover one"
        return None

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        (tokens,) = inputs
        route = self._route(model, tokens)
        if route == "merged":
            return merged_logits(model, tokens)
        table = table_logits(model, self._all_sequences(model, tokens.device))
        if route == "table":
            return table
        rows = sequence_index(tokens, model.N)[..., None].expand(-1, -1, model.N)
        return torch.gather(table, 1, rows)

    def __call__(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        (tokens,) = inputs
        if self._direct and self._one_node(model, tokens, objective):
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
        """The one-node step where it applies (float32 and wider), else the routed outputs
        and the loss in float32."""
        (tokens,) = inputs
        low = next(model.parameters()).dtype in (torch.bfloat16, torch.float16)
        if low or not self._one_node(model, tokens, objective):
            return super().loss(model, inputs, targets, weights, objective)
        loss = ExampleLoss(targets, weights, classification=True)
        w = model.weights()
        per_replica, logits = MergedStep.apply(
            tokens, model.scale, loss, model.N, *(w.get(name) for name in NAMES)
        )
        return per_replica, logits.transpose(1, 2)

    def _one_node(self, model: ReplicaTransformer, tokens: Tensor, objective: Objective) -> bool:
        """A classification mini-batch of S ≥ 2 through merged heads."""
        one = objective == "classification" and model.S >= 2
        return one and self._route(model, tokens) == "merged"

    def _route(self, model: ReplicaTransformer, tokens: Tensor) -> str:
        """``table`` (every input in table order, the same for every replica), ``merged``
        (per example) or ``rows`` (rows of the table). The table takes more operations per
        call: it pays where it computes at most a quarter as many rows as the batch has (a
        batch of 256 over N^S = 100 does not)."""
        rows = sequence_index(tokens, model.N)  # (R, B)
        everything = model.N**model.S
        if rows.shape[1] == everything:
            in_order = self._all_row_ids(model, tokens.device)
            if torch.equal(rows[0], in_order) and bool((rows == rows[0]).all()):
                return "table"
        return "merged" if rows.shape[1] < 4 * everything else "rows"

    def _all_sequences(self, model: ReplicaTransformer, device: torch.device) -> Tensor:
        key = (model.N, model.S, device)
        if key not in self._sequences:
            self._sequences[key] = all_sequences(model.N, model.S, device)
        return self._sequences[key]

    def _all_row_ids(self, model: ReplicaTransformer, device: torch.device) -> Tensor:
        key = (model.N**model.S, device)
        if key not in self._row_ids:
            self._row_ids[key] = torch.arange(key[0], device=device)
        return self._row_ids[key]
