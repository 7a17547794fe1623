"""AoT training step: our mini-batch path vs the previous one and the naive one, CPU per step.

Paper B's heads sweep as the default run trains it (the authors' recipe and variant: N = 50,
S = 2, d = d_h = 10, H = 1, 11, 21, 31 as one padded model, Adam steps on mini-batches of
256), timed three ways in one process on the same replicas and batch:

- ours: the fast engine's step from the token lookup to the loss as one node with a
  hand-written backward (``memcap.aot.engine.FastStep.loss``, merged heads) and fused Adam;
- merged: merged heads (``memcap.aot.merged.merged_logits``) with autograd around the
  attention (the rest of the model and the loss), fused Adam: the step before the one node;
- previous: per-example rows gathered from token tables, per-head products, plain Adam (the
  code before issue 22, kept here as the reference);
- naive: the model's own forward (per-example attention: the reference engine), plain Adam.

``--heads``, ``--batch``, ``--variant``, ``--N`` and ``--d`` change the setting. CPU seconds
(``time.process_time``) per step, median of ``--repeats`` rounds; the machine's
single-thread float32 1024² matmul GFLOP/s is printed for scale; the last lines are
``RATIO merged/ours``, ``RATIO previous/ours`` and ``RATIO naive/ours``.

    .venv/bin/python benchmarks/bench_aot.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from _results import record
from torch import Tensor

from memcap.aot.engine import FastStep
from memcap.aot.merged import merged_logits
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tables import token_tables
from memcap.aot.tasks import association_task
from memcap.training.config import TrainConfig

LossOf = Callable[[ReplicaTransformer, Tensor, Tensor], Tensor]


def previous_batch_logits(model: ReplicaTransformer, tokens: Tensor) -> Tensor:
    """The previous mini-batch path: token-table rows per example, products per head."""
    w = model.weights()
    x_tab, q_tab, k_tab, ov_tab = token_tables(model, w)
    R, B, S = tokens.shape
    N, H, dh, D = model.N, q_tab.shape[2], q_tab.shape[3], x_tab.shape[-1]
    offsets = torch.arange(R)[:, None] * N
    k, ov = [], []
    for s in range(S):
        parts = [k_tab[:, s].reshape(R, N, -1), ov_tab[:, s].reshape(R, N, -1)]
        if s == S - 1:
            parts += [q_tab.reshape(R, N, -1), x_tab[:, s]]
        table = torch.cat(parts, -1)
        rows = torch.index_select(table.flatten(0, 1), 0, (tokens[:, :, s] + offsets).flatten())
        sizes = [H * dh, H * D] + ([H * dh, D] if s == S - 1 else [])
        pieces = torch.split(rows.view(R, B, -1), sizes, dim=-1)
        k.append(pieces[0].reshape(R, B, H, dh))
        ov.append(pieces[1].reshape(R, B, H, D))
        if s == S - 1:
            q, x_last = pieces[2].reshape(R, B, H, dh), pieces[3]
    scores = [(q * key).sum(-1) for key in k]
    if S == 2:
        first = torch.sigmoid(scores[0] - scores[1])
        attn = [first, 1 - first]
    else:
        attn = torch.softmax(torch.stack(scores), dim=0)
    x = x_last + sum((a[..., None] * value).sum(2) for a, value in zip(attn, ov, strict=True))
    if model.has_mlp:
        x = x + model.mlp(x, w, 0)
    return model.read_out(x, w)


def plain_loss(logits_of: Callable[[ReplicaTransformer, Tensor], Tensor]) -> LossOf:
    """The mean cross-entropy of a logits function, through autograd."""

    def loss(model: ReplicaTransformer, tokens: Tensor, targets: Tensor) -> Tensor:
        logits = logits_of(model, tokens)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return loss


_CFG = TrainConfig(
    steps=1, lr=1e-2, warmup_frac=0.0, schedule="constant", batch_size=None, eval_every=1,
    early_stop=False, regression_tol=None,
)  # fmt: skip


def fused_loss(model: ReplicaTransformer, tokens: Tensor, targets: Tensor) -> Tensor:
    """The same loss through the fast engine's one-node step (summed over replicas, as above)."""
    weights = torch.full(targets.shape, 1.0 / targets.numel())
    step = FastStep(_CFG, torch.device("cpu"))
    return step.loss(model, (tokens,), targets, weights, "classification")[0].sum()


def step_cpu(
    settings: list[Setting],
    batch: int,
    loss_of: LossOf,
    fused: bool,
    repeats: int,
    steps: int = 20,
) -> float:
    """Median CPU seconds of one Adam step on ``batch`` examples per replica."""
    model = ReplicaTransformer(settings, list(range(len(settings))))
    tasks = [association_task(s.N, s.S, r) for r, s in enumerate(settings)]
    rows = torch.randint(settings[0].T0, (batch,), generator=torch.Generator().manual_seed(0))
    tokens = torch.stack([t.inputs[rows] for t in tasks])
    targets = torch.stack([t.targets[rows] for t in tasks])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_of(model, tokens, targets).backward()
        optimizer.step()

    step()  # warm-up
    rounds = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(steps):
            step()
        rounds.append((time.process_time() - start) / steps)
    return statistics.median(rounds)


def matmul_gflops(size: int = 1024, repeats: int = 10) -> float:
    """Float32 matrix-product speed of this machine at the current thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.process_time()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.process_time() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="1,11,21,31", help="head counts, one replica each")
    parser.add_argument("--batch", type=int, default=256, help="examples per replica and step")
    parser.add_argument("--variant", default="code", choices=["paper", "code"])
    parser.add_argument("--N", type=int, default=50, help="dictionary size (T0 = N^2)")
    parser.add_argument("--d", type=int, default=10, help="embedding = head dimension")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of 20 steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = [
        Setting(
            "bench", "association", "aot", args.N, 2, args.d, args.d, int(h), variant=args.variant
        )
        for h in args.heads.split(",")
    ]
    ours = step_cpu(settings, args.batch, fused_loss, True, args.repeats)
    merged = step_cpu(settings, args.batch, plain_loss(merged_logits), True, args.repeats)
    previous_loss = plain_loss(previous_batch_logits)
    previous = step_cpu(settings, args.batch, previous_loss, False, args.repeats)
    naive = step_cpu(
        settings,
        args.batch,
        plain_loss(lambda m, t: m(t)),
        False,
        args.repeats,
    )
    print(f"matmul 1024² float32, {args.threads} thread(s): {matmul_gflops():.0f} GFLOP/s")
    print(f"replicas {len(settings)} (H = {args.heads}), batch {args.batch}, {args.variant}")
    print(f"ours (one-node step, fused Adam)  {1000 * ours:7.2f} ms CPU/step")
    print(f"merged (merged heads, autograd)   {1000 * merged:7.2f} ms CPU/step")
    print(f"previous (token-table rows)       {1000 * previous:7.2f} ms CPU/step")
    print(f"naive (per-example attention)     {1000 * naive:7.2f} ms CPU/step")
    record(
        __file__,
        f"one Adam step of paper B's heads sweep ({args.threads} thread(s)): the fast engine's "
        "one-node step vs merged heads under autograd / token-table rows / the reference "
        "engine (the model's per-example forward)",
        naive / ours,
        ("fast engine (one-node step)", 1000 * ours, "ms CPU per step"),
        ("reference engine", 1000 * naive, "ms CPU per step"),
        ratio_is="reference seconds / fast seconds",
        repeats=args.repeats,
        settings=args,
        other_ratios={"merged/ours": merged / ours, "previous/ours": previous / ours},
    )
    print(f"RATIO merged/ours {merged / ours:.2f}")
    print(f"RATIO previous/ours {previous / ours:.2f}")
    print(f"RATIO naive/ours {naive / ours:.2f}")


if __name__ == "__main__":
    main()
