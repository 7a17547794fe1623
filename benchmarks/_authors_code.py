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
computed (the same function and gradients, less work). The seeds of one setting and T train
as one replica-batched model (:class:`AuthorsBatch`), each replica exactly its own model.
"""

from __future__ import annotations

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


class AuthorsBatch(nn.Module):
    """R models of :class:`AuthorsMHA` (one shape) with their parameters stacked along a
    leading replica axis: replica r computes exactly ``models[r]``'s function, and Adam, being
    element-wise, trains each as if alone."""

    def __init__(self, models: list[AuthorsMHA]) -> None:
        super().__init__()

        def stack(get) -> nn.Parameter:
            return nn.Parameter(torch.stack([get(m).detach().clone() for m in models]))

        self.w_embed = stack(lambda m: m.embedding.weight.T)  # (R, d, d)
        self.b_embed = stack(lambda m: m.embedding.bias)  # (R, d)
        self.w_query = stack(lambda m: m.w_query)  # (R, H, d, dh)
        self.w_key = stack(lambda m: m.w_key)
        self.w_value = stack(lambda m: m.w_value[..., 0])  # (R, H, d)
        self.w_out = stack(lambda m: m.w_out)  # (R, H, d)
        self.w_decode = stack(lambda m: m.decoder.weight.T)  # (R, d, C)
        self.b_decode = stack(lambda m: m.decoder.bias)  # (R, C)
        self.register_buffer("positions", models[0].positions.clone())
        self.scale = models[0].scale

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        """Logits (R, B, C) from queries (R, B, d) and contexts (R, B, n, d)."""
        replicas, batch, n, d = context.shape
        heads, head_dim = self.w_query.shape[1], self.w_query.shape[3]
        x = torch.bmm(query, self.w_embed) + self.b_embed[:, None] + self.positions[0]
        e = torch.bmm(context.reshape(replicas, batch * n, d), self.w_embed)
        e = e.view(replicas, batch, n, d) + self.b_embed[:, None, None] + self.positions[1:]
        flat = e.view(replicas, batch * n, d)
        w_query = self.w_query.transpose(1, 2).reshape(replicas, d, heads * head_dim)
        w_key = self.w_key.transpose(1, 2).reshape(replicas, d, heads * head_dim)
        q = torch.bmm(x, w_query).view(replicas, batch, 1, heads, head_dim)
        k = torch.bmm(flat, w_key).view(replicas, batch, n, heads, head_dim)
        v = torch.bmm(flat, self.w_value.transpose(1, 2)).view(replicas, batch, n, heads)
        attention = torch.softmax((q * k).sum(-1) * self.scale, 2)  # (R, B, n, H) over n
        mixed = (attention * v).sum(2)  # (R, B, H)
        out = torch.bmm(mixed, self.w_out)
        return torch.bmm(out, self.w_decode) + self.b_decode[:, None]


def authors_steps(examples: int, batch_size: int = 256, epochs: int = 500) -> int:
    """The authors' step count: max(epochs · T // batch_size, 50,000)."""
    return max(epochs * examples // batch_size, 50_000)


def _losses(logits: Tensor, labels: Tensor) -> Tensor:
    """(R,) mean cross-entropy of each replica."""
    return nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none").mean(1)


@torch.no_grad()
def _evaluate(model: nn.Module, query: Tensor, context: Tensor, labels: Tensor) -> tuple:
    logits = model(query, context)
    return _losses(logits, labels), (logits.argmax(-1) == labels).sum(1)


def train_authors(
    query: Tensor,
    context: Tensor,
    labels: Tensor,
    heads: int,
    head_dim: int,
    classes: int,
    seeds: list[int],
    steps: int | None = None,
    batch_size: int = 256,
    lr: float = 1e-3,
    eval_every: int = 500,
) -> list[dict]:
    """Train one model per seed the authors' way, replica r on (R, T, d) queries, (R, T, n, d)
    contexts and (R, T) labels; per replica the memorized count of its lowest-loss evaluated
    state and how far it trained (a replica at 100% stops: its parameters stay as they were)."""
    replicas, examples, n, d = context.shape
    steps = authors_steps(examples, batch_size) if steps is None else steps
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(AuthorsMHA(d, n, heads, head_dim, classes))
    model = AuthorsBatch(models)
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
    rows = torch.arange(replicas)[:, None]
    best_loss = torch.full((replicas,), math.inf)
    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    stopped = torch.zeros(replicas, dtype=torch.bool)
    steps_run = torch.full((replicas,), steps)
    order, cursor = torch.stack([torch.randperm(examples) for _ in seeds]), 0
    for step in range(steps):
        if cursor >= examples:  # a shuffled DataLoader per replica: a new order every epoch
            order, cursor = torch.stack([torch.randperm(examples) for _ in seeds]), 0
        batch = order[:, cursor : cursor + batch_size]
        cursor += batch_size
        logits = model(query[rows, batch], context[rows, batch])
        loss = _losses(logits, labels[rows, batch]).sum()
        optimizer.zero_grad()
        loss.backward()
        frozen = [p.detach()[stopped].clone() for p in model.parameters()]
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            for p, kept in zip(model.parameters(), frozen, strict=True):
                p[stopped] = kept
        if step % eval_every == 0:
            current, right = _evaluate(model, query, context, labels)
            better = (current < best_loss) & ~stopped
            best_loss = torch.where(better, current, best_loss)
            for name, value in model.state_dict().items():
                if name != "positions":
                    best_state[name][better] = value[better]
            newly = (right == examples) & ~stopped
            steps_run[newly] = step + 1
            stopped |= newly
            if bool(stopped.all()):
                break
    model.load_state_dict(best_state)
    _, memorized = _evaluate(model, query, context, labels)
    return [
        {
            "memorized": int(memorized[r]),
            "steps_run": int(steps_run[r]),
            "best_loss": float(best_loss[r]),
        }
        for r in range(replicas)
    ]
