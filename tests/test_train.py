"""The shared replica-batched training loop."""

import numpy as np
import pytest
import torch
from torch import nn
from train_configs import train_config

from memcap.training.loop import (
    ReplicaData,
    evaluate,
    kl_divergence,
    lr_multiplier,
    train_replicas,
)


class ReplicaMLP(nn.Module):
    """A replica-batched two-layer classifier (R independent MLPs)."""

    def __init__(self, seeds: list[int], d_in: int, width: int, d_out: int) -> None:
        super().__init__()
        weights = []
        for seed in seeds:
            g = torch.Generator().manual_seed(seed)
            weights.append(
                (torch.randn(d_in, width, generator=g), torch.randn(width, d_out, generator=g))
            )
        self.w1 = nn.Parameter(torch.stack([w for w, _ in weights]) / d_in**0.5)
        self.w2 = nn.Parameter(torch.stack([w for _, w in weights]) / width**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.w1) @ self.w2  # (R, B, d_out)


def _data(seeds: list[int], sizes: list[int], d_in: int = 8, classes: int = 5) -> ReplicaData:
    t_max = max(sizes)
    xs, ys = [], []
    for seed in seeds:
        g = torch.Generator().manual_seed(1000 + seed)
        xs.append(torch.randn(64, d_in, generator=g)[:t_max])
        ys.append(torch.randint(classes, (64,), generator=g)[:t_max])
    return ReplicaData((torch.stack(xs),), torch.stack(ys), torch.tensor(sizes))


def test_schedule_warms_up_then_decays_to_zero():
    cfg = train_config(steps=100, warmup_frac=0.1, schedule="cosine")
    factors = [lr_multiplier(s, cfg) for s in range(100)]
    assert factors[0] == pytest.approx(0.1)
    assert factors[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:], strict=False))
    assert factors[-1] < 0.01
    linear = train_config(steps=10, warmup_frac=0.0, schedule="linear")
    assert lr_multiplier(5, linear) == pytest.approx(0.5)


@pytest.mark.parametrize("batch_size", [None, 16])
def test_batched_replicas_match_single_model_training(batch_size):
    seeds, sizes = [0, 1, 2], [40, 25, 60]
    cfg = train_config(steps=60, lr=1e-2, eval_every=10, batch_size=batch_size, early_stop=False)
    batched = train_replicas(
        ReplicaMLP(seeds, 8, 32, 5), _data(seeds, sizes), "classification", cfg, seeds
    )
    for r, (seed, size) in enumerate(zip(seeds, sizes, strict=True)):
        data = _data([seed], [size])
        data = ReplicaData((data.inputs[0][:, :size],), data.targets[:, :size], data.sizes)
        single = train_replicas(ReplicaMLP([seed], 8, 32, 5), data, "classification", cfg, [seed])
        np.testing.assert_allclose(batched.loss_curve[:, r], single.loss_curve[:, 0], rtol=1e-4)
        assert batched.memorized[r] == single.memorized[0]


def test_early_stop_and_best_state_are_kept():
    seeds = [3, 4]
    data = _data(seeds, [20, 30])
    model = ReplicaMLP(seeds, 8, 64, 5)
    cfg = train_config(steps=3000, lr=3e-2, eval_every=20)
    result = train_replicas(model, data, "classification", cfg, seeds)
    assert (result.accuracy == 1.0).all()
    assert result.steps_run < cfg.steps
    assert (result.fit_step > 0).all()
    again = evaluate(model, data, "classification", None)
    np.testing.assert_array_equal(again["memorized"].numpy(), result.memorized)


def test_regression_objective_counts_errors_under_tolerance():
    seeds = [0]
    data = _data(seeds, [10])
    data = ReplicaData(data.inputs, torch.rand(1, 10), data.sizes)
    model = ReplicaMLP(seeds, 8, 64, 1)

    class Squeeze(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, x):
            return self.inner(x).squeeze(-1)

    cfg = train_config(steps=2000, lr=1e-2, regression_tol=0.05, eval_every=20)
    result = train_replicas(Squeeze(), data, "regression", cfg, seeds)
    assert result.memorized[0] == 10
    assert np.isnan(result.kl).all()


def test_kl_is_zero_for_exact_distribution_and_positive_otherwise():
    probs = torch.softmax(torch.randn(2, 4, 7), -1)
    assert kl_divergence(probs, probs.log()).abs().max() < 1e-6
    assert (kl_divergence(probs, torch.zeros(2, 4, 7)) > 0).all()
    one_hot = torch.nn.functional.one_hot(torch.tensor([[1, 2]]), 3).float()
    assert torch.isfinite(kl_divergence(one_hot, torch.randn(1, 2, 3))).all()


def test_parameters_without_replica_axis_are_rejected():
    data = _data([0, 1], [5, 5])
    with pytest.raises(ValueError, match="leading replica axis"):
        train_replicas(
            ReplicaMLP([0, 1, 2], 8, 4, 5), data, "classification", train_config(), [0, 1]
        )
