"""FusedAdam is torch.optim.Adam(fused=True) under a per-step learning rate, number for number."""

import torch

from memcap.training.config import TrainConfig, lr_multiplier
from memcap.training.step import FusedAdam


def test_fused_adam_equals_torch_adam_with_lambda_lr():
    torch.manual_seed(0)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    ours = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    cfg = TrainConfig(
        steps=12,
        lr=0.05,
        warmup_frac=0.25,
        schedule="linear",
        batch_size=None,
        eval_every=12,
        early_stop=False,
        regression_tol=None,
    )
    start = [p.detach().clone() for p in ours]
    adam = FusedAdam(ours)
    reference = torch.optim.Adam(theirs, lr=cfg.lr, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(reference, lambda s: lr_multiplier(s, cfg))
    for step in range(cfg.steps):
        adam.zero_grad()
        reference.zero_grad(set_to_none=True)
        for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if k == 2 and step < 3:
                continue  # a parameter without a gradient is left alone, its state unborn
            target = torch.randn(a.shape)
            ((a - target) ** 2).sum().backward()
            ((b - target) ** 2).sum().backward()
        adam.step(cfg.lr * lr_multiplier(step, cfg))
        reference.step()
        schedule.step()
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)
    assert all(not torch.equal(p, p0) for p, p0 in zip(ours, start, strict=True))
