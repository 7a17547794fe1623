"""Paper A's synthetic model and trainer as the authors' published code defines them, written
independently of memcap's engine so that ``recipe_comparison.py`` measures our capacity
against theirs and not against our own engine running their settings.

What it follows (smahdavi4/attention-memorization, ``src/attn_models.py``, ``src/trainers.py``,
``src/main.py``, ``src/task_datasets.py``): ``nn.Linear`` token embedding of the d-dimensional
inputs into d_model = d (PyTorch's default init, with bias), sinusoidal positions, one
attention layer whose heads have their own W_q, W_k (d × d_h) and W_v (d × 1) initialised by
Xavier-uniform head by head, W_o (H × d) Xavier-uniform, no attention biases, scores divided
by √d, a mask that stops every token from attending to token 0, an ``nn.Linear`` decoder
(default init) read at token 0; cross-entropy; Adam (lr 1e-3) on shuffled batches of 256,
max(500·T / 256, 50,000) steps, linear warm-up from 0.01·lr over the first 5% of the steps
(``LinearLR``) then cosine decay to zero (``CosineAnnealingLR``); the full training set is
evaluated every 500 steps, training stops at 100% accuracy, and the state of lowest training
loss is what is scored. Only token 0's output enters the loss, so only its row of attention is
computed (the same function and gradients, less work).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor, nn

from memcap.synthetic.model import sinusoidal_positions


class AuthorsMHA(nn.Module):
    """One model of paper A's code: embedding, positions, H heads with d_v = 1, decoder."""

    def __init__(self, d: int, n: int, heads: int, head_dim: int, classes: int) -> None:
        super().__init__()
        self.embedding = nn.Linear(d, d)
        self.register_buffer("positions", sinusoidal_positions(n + 1, d))
        self.w_query = nn.Parameter(torch.empty(heads, d, head_dim))
        self.w_key = nn.Parameter(torch.empty(heads, d, head_dim))
        self.w_value = nn.Parameter(torch.empty(heads, d, 1))
        self.w_out = nn.Parameter(torch.empty(heads, d))
        for h in range(heads):  # Xavier bounds of each head's own (d, d_h) matrix
            nn.init.xavier_uniform_(self.w_query[h])
            nn.init.xavier_uniform_(self.w_key[h])
            nn.init.xavier_uniform_(self.w_value[h])
        nn.init.xavier_uniform_(self.w_out)
        self.decoder = nn.Linear(d, classes)
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        """Logits (B, C) at token 0 from queries (B, d) and contexts (B, n, d)."""
        heads, d, head_dim = self.w_query.shape
        x = self.embedding(query) + self.positions[0]  # (B, d)
        e = self.embedding(context) + self.positions[1:]  # (B, n, d)
        q = (x @ self.w_query.transpose(0, 1).reshape(d, -1)).view(-1, 1, heads, head_dim)
        k = (e @ self.w_key.transpose(0, 1).reshape(d, -1)).view(*e.shape[:2], heads, head_dim)
        v = e @ self.w_value[..., 0].T  # (B, n, H)
        attention = torch.softmax((q * k).sum(-1) * self.scale, 1)  # (B, n, H) over n
        mixed = (attention * v).sum(1)  # (B, H)
        return self.decoder(mixed @ self.w_out)


def authors_steps(examples: int, batch_size: int = 256, epochs: int = 500) -> int:
    """The authors' step count: max(epochs · T // batch_size, 50,000)."""
    return max(epochs * examples // batch_size, 50_000)


@torch.no_grad()
def _evaluate(model: nn.Module, query: Tensor, context: Tensor, labels: Tensor) -> tuple:
    logits = model(query, context)
    loss = float(nn.functional.cross_entropy(logits, labels))
    return loss, int((logits.argmax(-1) == labels).sum())


def train_authors(
    query: Tensor,
    context: Tensor,
    labels: Tensor,
    heads: int,
    head_dim: int,
    classes: int,
    seed: int,
    steps: int | None = None,
    batch_size: int = 256,
    lr: float = 1e-3,
    eval_every: int = 500,
) -> dict:
    """Train one model the authors' way on (T, d) queries, (T, n, d) contexts and labels;
    the memorized count of its lowest-loss evaluated state, and how far it trained."""
    torch.manual_seed(seed)
    examples, n, d = context.shape
    steps = authors_steps(examples, batch_size) if steps is None else steps
    model = AuthorsMHA(d, n, heads, head_dim, classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    warmup = steps // 20
    scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer,
        [
            torch.optim.lr_scheduler.LinearLR(optimizer, 0.01, 1.0, total_iters=warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - warmup),
        ],
        milestones=[warmup],
    )
    best_loss, best_state, order, cursor = math.inf, None, torch.randperm(examples), 0
    step = 0
    for step in range(steps):
        if cursor >= examples:  # a shuffled DataLoader: a new order every epoch
            order, cursor = torch.randperm(examples), 0
        batch = order[cursor : cursor + batch_size]
        cursor += batch_size
        loss = nn.functional.cross_entropy(model(query[batch], context[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % eval_every == 0:
            current, right = _evaluate(model, query, context, labels)
            if current < best_loss:
                best_loss, best_state = current, copy.deepcopy(model.state_dict())
            if right == examples:
                break
    model.load_state_dict(best_state)
    _, memorized = _evaluate(model, query, context, labels)
    return {"memorized": memorized, "steps_run": step + 1, "best_loss": best_loss}
