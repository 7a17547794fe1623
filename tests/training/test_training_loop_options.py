"""How the shared training loop runs: precision, compilation, and fitted replicas leaving."""

import logging
import shutil

import numpy as np
import pytest
import torch
from torch import nn
from train_configs import train_config

from memcap.training.config import TrainConfig
from memcap.training.data import ReplicaData
from memcap.training.loop import evaluate, train_replicas
from memcap.training.plateau import still_learning
from memcap.training.step import FusedAdam


class ReplicaMLP(nn.Module):
    """R independent two-layer classifiers."""

    def __init__(self, seeds: list[int], d_in: int = 8, width: int = 32, d_out: int = 5) -> None:
        super().__init__()
        w1, w2 = [], []
        for seed in seeds:
            g = torch.Generator().manual_seed(seed)
            w1.append(torch.randn(d_in, width, generator=g) / d_in**0.5)
            w2.append(torch.randn(width, d_out, generator=g) / width**0.5)
        self.w1, self.w2 = nn.Parameter(torch.stack(w1)), nn.Parameter(torch.stack(w2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.w1) @ self.w2  # (R, B, d_out)


def _data(seeds: list[int], sizes: list[int], d_in: int = 8, classes: int = 5) -> ReplicaData:
    xs, ys = [], []
    for seed in seeds:
        g = torch.Generator().manual_seed(1000 + seed)
        xs.append(torch.randn(max(sizes), d_in, generator=g))
        ys.append(torch.randint(classes, (max(sizes),), generator=g))
    return ReplicaData((torch.stack(xs),), torch.stack(ys), torch.tensor(sizes))


def _train(cfg: TrainConfig, seeds: list[int], sizes: list[int]):
    model = ReplicaMLP(seeds)
    data = _data(seeds, sizes)
    return model, data, train_replicas(model, data, "classification", cfg, seeds)


@pytest.mark.parametrize("batch_size", [None, 8])
def test_fitted_replicas_leave_without_changing_memorized_counts(batch_size):
    # Small training sets fit early and leave; the large ones train on alone. best_by
    # memorized: a replica at 100% could only lower its loss had it stayed.
    seeds, sizes = [0, 1, 2, 3], [6, 256, 10, 256]
    cfg = train_config(steps=200, lr=1e-2, eval_every=20, batch_size=batch_size, early_stop=False)
    _, _, stay = _train(cfg, seeds, sizes)
    model, data, leave = _train(
        TrainConfig(**{**cfg.__dict__, "leave_when_fit": True}), seeds, sizes
    )
    fitted = stay.fit_step >= 0
    assert fitted.any() and not fitted.all()  # some leave, some stay to the end
    np.testing.assert_array_equal(leave.memorized, stay.memorized)
    np.testing.assert_array_equal(leave.fit_step, stay.fit_step)
    # Replicas that never fit trained on as they would have, step for step.
    np.testing.assert_allclose(leave.loss_curve[:, ~fitted], stay.loss_curve[:, ~fitted], rtol=1e-5)
    # A fitted replica's curve is flat after it left; the caller's model holds every best state.
    first = int(leave.fit_step[fitted][0]) // cfg.eval_every
    assert (
        leave.loss_curve[first:, np.flatnonzero(fitted)[0]]
        == leave.loss_curve[-1, np.flatnonzero(fitted)[0]]
    ).all()
    again = evaluate(model, data, "classification", None)
    np.testing.assert_array_equal(again["memorized"].numpy(), leave.memorized)


def test_every_replica_fitted_ends_training_when_they_leave():
    seeds, sizes = [0, 1], [5, 6]
    cfg = train_config(steps=2000, lr=3e-2, eval_every=20, early_stop=False, leave_when_fit=True)
    _, _, result = _train(cfg, seeds, sizes)
    assert (result.accuracy == 1.0).all()
    assert (result.steps_run < cfg.steps).all()


def test_extra_budgets_train_only_the_replicas_still_learning():
    # Replicas 0 and 2 fit their few examples; 1 and 3 fit neither 256 nor 64 random labels
    # within one budget at a constant rate, their loss still falling.
    seeds, sizes = [0, 1, 2, 3], [6, 256, 10, 64]
    cfg = train_config(steps=100, lr=1e-2, eval_every=10, early_stop=False, schedule="constant")
    _, _, once = _train(cfg, seeds, sizes)
    learning = still_learning(once.loss_curve, once.evaluations, once.fit_step >= 0)
    assert learning.any() and not learning.all()
    model, data, more = _train(TrainConfig(**{**cfg.__dict__, "extra_budgets": 2}), seeds, sizes)
    # The others stopped with one budget: results and curves as without extra budgets.
    stopped = ~learning
    np.testing.assert_array_equal(more.steps_run[stopped], cfg.steps)
    np.testing.assert_array_equal(more.evaluations[stopped], cfg.steps // cfg.eval_every)
    for field in ("memorized", "loss", "fit_step"):
        np.testing.assert_array_equal(getattr(more, field)[stopped], getattr(once, field)[stopped])
    rows = cfg.steps // cfg.eval_every + 1
    np.testing.assert_array_equal(more.loss_curve[:rows], once.loss_curve)
    # Those still learning trained on (the kept state never memorizes less) and ran a
    # further budget at least, their own curve as long as their evaluations.
    assert (more.steps_run[learning] >= 2 * cfg.steps).all()
    assert (more.steps_run[learning] <= 3 * cfg.steps).all()
    np.testing.assert_array_equal(more.evaluations, more.steps_run // cfg.eval_every)
    assert (more.memorized[learning] >= once.memorized[learning]).all()
    assert (more.memorized[learning] > once.memorized[learning]).any()
    # A replica that stopped after a budget has a flat curve from then on.
    stop = np.flatnonzero(learning & (more.steps_run < 3 * cfg.steps))
    for r in stop:
        own = more.loss_curve[more.evaluations[r] :, r]
        assert (own == own[0]).all()
    again = evaluate(model, data, "classification", None)
    np.testing.assert_array_equal(again["memorized"].numpy(), more.memorized)


def test_extra_budgets_are_refused_with_last_batch_accuracy():
    with pytest.raises(ValueError, match="last batches"):
        train_config(extra_budgets=1, last_batches=3)


def test_leaving_needs_select_buffers_in_a_model_with_buffers():
    model = ReplicaMLP([0, 1])
    model.register_buffer("scale", torch.ones(2))
    cfg = train_config(steps=5, leave_when_fit=True)
    with pytest.raises(ValueError, match="select_buffers"):
        train_replicas(model, _data([0, 1], [4, 4]), "classification", cfg, [0, 1])


def test_leaving_is_refused_with_last_batch_accuracy():
    with pytest.raises(ValueError, match="last batches"):
        train_config(leave_when_fit=True, last_batches=3)


def test_selected_adam_continues_the_kept_replicas_exactly():
    torch.manual_seed(0)
    whole = nn.Parameter(torch.randn(3, 4))
    adam = FusedAdam([whole])
    targets = torch.randn(6, 3, 4)

    def step(param, optimizer, target):
        optimizer.zero_grad()
        ((param - target) ** 2).sum().backward()
        optimizer.step(0.1)

    for k in range(3):
        step(whole, adam, targets[k])
    kept = torch.tensor([0, 2])
    part = nn.Parameter(whole.detach().index_select(0, kept))
    part_start = part.detach().clone()
    part_adam = adam.selected([part], kept)
    for k in range(3, 6):
        step(whole, adam, targets[k])
        step(part, part_adam, targets[k, kept])
    # equal up to rounding: the fused kernel's vector lanes and scalar tail round differently,
    # and a kept element may move between them
    torch.testing.assert_close(part.detach(), whole.detach()[kept], rtol=1e-6, atol=1e-7)
    assert not torch.equal(part.detach(), part_start)


def test_tf32_is_a_no_op_on_the_cpu_and_says_so(caplog):
    seeds, sizes = [0, 1], [20, 30]
    cfg = train_config(steps=50, lr=1e-2, eval_every=10, early_stop=False)
    _, _, plain = _train(cfg, seeds, sizes)
    with caplog.at_level(logging.INFO, logger="memcap.training.loop"):
        _, _, tf32 = _train(TrainConfig(**{**cfg.__dict__, "precision": "tf32"}), seeds, sizes)
    np.testing.assert_array_equal(tf32.loss_curve, plain.loss_curve)
    assert "no effect on cpu" in caplog.text


def test_bf16_trains_float32_master_weights():
    seeds, sizes = [0, 1, 2], [20, 30, 40]
    cfg = train_config(steps=200, lr=1e-2, eval_every=20, early_stop=False)
    _, _, plain = _train(cfg, seeds, sizes)
    model, data, bf16 = _train(TrainConfig(**{**cfg.__dict__, "precision": "bf16"}), seeds, sizes)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not np.array_equal(bf16.loss_curve, plain.loss_curve)  # it did compute in bfloat16
    # the same optimisation at 8 bits of mantissa: the loss falls alike
    np.testing.assert_allclose(bf16.loss_curve[-1], plain.loss_curve[-1], rtol=0.1)
    assert (bf16.loss_curve[-1] < 0.5 * bf16.loss_curve[0]).all()


@pytest.mark.skipif(shutil.which("c++") is None, reason="the CPU inductor needs a C++ compiler")
def test_compiled_step_trains_as_the_eager_step():
    seeds, sizes = [0, 1], [24, 32]
    cfg = train_config(steps=60, lr=1e-2, eval_every=20, batch_size=8, early_stop=False)
    _, _, eager = _train(cfg, seeds, sizes)
    _, _, compiled = _train(TrainConfig(**{**cfg.__dict__, "compile": True}), seeds, sizes)
    np.testing.assert_allclose(compiled.loss_curve, eager.loss_curve, rtol=1e-4)
    # inductor's kernels sum in another order than ATen's: an example whose top two logits tie
    # to rounding may flip, so a count may differ by one on some CPU
    np.testing.assert_allclose(compiled.memorized, eager.memorized, atol=1)
