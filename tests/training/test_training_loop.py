"""The shared replica-batched training loop."""

import numpy as np
import pytest
import torch
from torch import nn
from train_configs import train_config

from memcap.training.config import lr_multiplier
from memcap.training.data import ReplicaData, kl_divergence
from memcap.training.loop import evaluate, train_replicas


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
    assert (result.steps_run < cfg.steps).all()
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


def test_per_epoch_linear_schedule_is_pytorchs_linear_lr():
    """The authors' LinearLR(0.1, 0.005, total_iters=64) on base 0.1, stepped per epoch."""
    epochs, batches = 8, 4
    cfg = train_config(
        steps=epochs * batches, lr=0.01, warmup_frac=0.0, schedule="linear",
        lr_period=batches, final_lr_frac=0.05,
    )  # fmt: skip
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=0.1)
    reference = torch.optim.lr_scheduler.LinearLR(optimizer, 0.1, 0.005, total_iters=epochs)
    for epoch in range(epochs):
        for b in range(batches):
            ours = cfg.lr * lr_multiplier(epoch * batches + b, cfg)
            assert ours == pytest.approx(optimizer.param_groups[0]["lr"])
        optimizer.step()  # no gradient: leaves the parameter, lets the scheduler step
        reference.step()


def test_warmup_starts_at_its_fraction():
    cfg = train_config(steps=100, warmup_frac=0.1, schedule="cosine", warmup_start=0.01)
    assert lr_multiplier(0, cfg) == pytest.approx(0.01 + 0.99 * 0.1)
    assert lr_multiplier(9, cfg) == pytest.approx(1.0)


def test_shuffled_epochs_visit_every_example_once_per_epoch():
    from memcap.training.data import BatchStream, replica_generators

    stream = BatchStream([12, 12], 4, "shuffle", replica_generators([0, 1], "cpu"))
    for _ in range(2):  # two epochs of three batches
        epoch = torch.cat([stream.next() for _ in range(3)], dim=1)
        assert all(sorted(row.tolist()) == list(range(12)) for row in epoch)
    with pytest.raises(ValueError, match="one dataset size"):
        BatchStream([12, 8], 4, "shuffle", replica_generators([0, 1], "cpu"))


def test_draws_made_a_block_at_a_time_are_the_step_by_step_draws_on_the_cpu():
    from memcap.training.data import BLOCK, BatchStream, replica_generators

    stream = BatchStream([12, 40_000], 4, "replacement", replica_generators([5, 6], "cpu"))
    drawn = torch.stack([stream.next() for _ in range(BLOCK + 3)], 1)  # across a block's end
    for row, (size, seed) in enumerate([(12, 5), (40_000, 6)]):
        g = torch.Generator().manual_seed(seed)
        step_by_step = torch.stack(
            [torch.randint(size, (4,), generator=g) for _ in range(BLOCK + 3)]
        )
        assert torch.equal(drawn[row], step_by_step)


@pytest.mark.parametrize("sampling", ["replacement", "shuffle"])
def test_a_replica_leaving_keeps_the_others_batch_streams(sampling):
    from memcap.training.data import BatchStream, replica_generators

    def stream():
        return BatchStream([12, 12, 12], 4, sampling, replica_generators([5, 6, 7], "cpu"))

    whole, leaving = stream(), stream()
    for step in range(70):  # past the first block of draws with replacement
        if step == 2:
            leaving.keep([0, 2])
        expected = whole.next()
        got = leaving.next()
        assert torch.equal(got, expected if step < 2 else expected[[0, 2]])


def test_last_batch_accuracy_is_the_mean_over_the_last_training_batches():
    class Constant(nn.Module):
        """Predicts class 0 always (one dummy parameter per replica)."""

        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(2, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(*x.shape[:2], 3)
            logits[..., 0] = 1.0
            return logits + 0 * self.w[:, :, None]

    targets = torch.tensor([[0] * 8, [0, 0, 1, 1, 2, 2, 2, 2]])  # replica 1: a quarter is 0
    data = ReplicaData((torch.zeros(2, 8, 1),), targets, torch.tensor([8, 8]))
    cfg = train_config(
        steps=20, batch_size=4, sampling="shuffle", last_batches=10, early_stop=False,
        eval_every=20,
    )  # fmt: skip
    result = train_replicas(Constant(), data, "classification", cfg, [0, 1])
    # each epoch holds two batches covering all 8 examples: the mean is exact over 10 batches
    np.testing.assert_allclose(result.batch_accuracy, [1.0, 0.25])
    plain = train_replicas(Constant(), data, "classification", train_config(steps=3), [0, 1])
    assert np.isnan(plain.batch_accuracy).all()


def test_best_by_loss_keeps_the_lowest_loss_state():
    from memcap.training.loop import improved as _improved

    old = {"memorized": torch.tensor([5.0, 5.0]), "loss": torch.tensor([1.0, 1.0])}
    new = {"memorized": torch.tensor([6.0, 4.0]), "loss": torch.tensor([1.5, 0.5])}
    assert _improved(new, old, "memorized").tolist() == [True, False]
    assert _improved(new, old, "loss").tolist() == [False, True]


def test_replicas_reading_one_stored_dataset_take_what_their_own_copies_give():
    from memcap.training.data import ReplicaData

    stored = torch.randn(3, 6, 3), torch.randn(3, 6, 4, 3)  # three distinct datasets
    source = torch.tensor([1, 0, 1, 2])
    copies = ReplicaData(
        tuple(x[source] for x in stored), torch.arange(24).view(4, 6), torch.tensor([6, 4, 5, 6])
    )
    shared = ReplicaData(stored, copies.targets, copies.sizes, source)
    index = torch.tensor([[0, 5], [3, 3], [2, 1], [4, 0]])
    (inputs, targets), (want_inputs, want_targets) = shared.take(index), copies.take(index)
    assert torch.equal(targets, want_targets)
    for a, b in zip(inputs, want_inputs, strict=True):
        assert torch.equal(a, b)
    for kept, rows in (([2, 0], 1), ([2, 3, 0], 2), ([0, 1], 2), ([3], 1)):
        left = shared.select(torch.tensor(kept))
        assert len(left.inputs[0]) == rows  # the datasets still read, each once
        assert (left.source is None) == (rows == len(kept))
        want = copies.select(torch.tensor(kept)).inputs
        for a, b in zip(left.replica_inputs(), want, strict=True):
            assert torch.equal(a, b)
        for a, b in zip(left.examples(slice(2, 5)), want, strict=True):
            assert torch.equal(a, b[:, 2:5])  # every replica's own rows, gathered
