"""Counted batches: a mini-batch over few distinct examples, each computed once and weighted."""

import torch
from train_configs import train_config

import memcap.training.step as step_module
from memcap.aot.model import AoTStep, ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tasks import association_task, fixed_sample
from memcap.training.data import (
    ReplicaData,
    _first_seen,
    _row_keys,
    counted_batches,
    example_correct,
)
from memcap.training.loop import train_replicas


def _data(R: int = 2, N: int = 3, sample: int = 64) -> ReplicaData:
    tasks = [fixed_sample(association_task(N, 2, seed), sample, seed + 10) for seed in range(R)]
    return ReplicaData(
        inputs=(torch.stack([t.inputs for t in tasks]),),
        targets=torch.stack([t.targets for t in tasks]),
        sizes=torch.full((R,), sample),
    )


def _model(R: int = 2, N: int = 3) -> ReplicaTransformer:
    setting = Setting("t", "association", "aot", N, 2, 4, 4, 3, 1, 0, 1.0, "code")
    return ReplicaTransformer([setting] * R, list(range(R)))


def test_counted_batch_has_the_drawn_batchs_loss_gradients_and_accuracy():
    data, batch = _data(), 32
    counted = counted_batches(data, batch)
    assert counted is not None and counted.distinct <= 9  # N^S = 9 inputs
    index = torch.randint(64, (2, batch), generator=torch.Generator().manual_seed(1))
    model = _model()
    step_of = AoTStep(train_config(), torch.device("cpu"))

    def step(inputs, targets, weights):
        model.zero_grad(set_to_none=True)
        per_replica, logits = step_of.loss(model, inputs, targets, weights, "classification")
        per_replica.sum().backward()
        right = example_correct(logits.detach(), targets, "classification", None)
        grads = {
            n: torch.zeros_like(p) if p.grad is None else p.grad.clone()
            for n, p in model.named_parameters()
        }
        return per_replica.detach(), (right * weights).sum(1), grads

    inputs, targets = data.take(index)
    drawn = step(inputs, targets, torch.full((2, batch), 1.0 / batch))
    once = step(*counted.take(index))
    assert counted.take(index)[2].sum(1).tolist() == [1.0, 1.0]  # counts over the batch size
    torch.testing.assert_close(once[0], drawn[0])
    torch.testing.assert_close(once[1], drawn[1])
    for name, grad in drawn[2].items():
        torch.testing.assert_close(once[2][name], grad, msg=name)


def test_counted_batches_only_where_they_pay():
    assert counted_batches(_data(N=3), 32) is not None
    assert counted_batches(_data(N=3), 16) is None  # 9 distinct rows: more than half a batch
    assert counted_batches(_data(N=3), None) is None  # full batch
    floats = _data(N=3)
    floats.targets = floats.targets.float()  # regression-like targets: no counting
    assert counted_batches(floats, 32) is None


def test_training_with_counted_batches_matches_the_drawn_batches(monkeypatch):
    cfg = train_config(
        steps=20, lr=1e-2, batch_size=32, eval_every=20, sampling="shuffle", last_batches=5
    )
    counted = train_replicas(_model(), _data(), "classification", cfg, [0, 1])
    monkeypatch.setattr(step_module, "counted_batches", lambda data, batch: None)
    drawn = train_replicas(_model(), _data(), "classification", cfg, [0, 1])
    torch.testing.assert_close(torch.tensor(counted.loss), torch.tensor(drawn.loss))
    torch.testing.assert_close(
        torch.tensor(counted.batch_accuracy), torch.tensor(drawn.batch_accuracy)
    )


def _first_seen_reference(rows: torch.Tensor) -> tuple[list, list]:
    seen: dict[tuple, int] = {}
    for row in rows.tolist():
        seen.setdefault(tuple(row), len(seen))
    return list(seen), [seen[tuple(row)] for row in rows.tolist()]


def test_distinct_rows_in_order_of_first_appearance_whatever_the_values():
    g = torch.Generator().manual_seed(0)
    small = torch.randint(0, 5, (300, 3), generator=g)  # 1-D keys
    negative = small - 2  # unique over rows
    huge = small * 2**40  # keys past int64: unique over rows
    for rows in (small, negative, huge):
        distinct, row_of = _first_seen(rows)
        want_rows, want_of = _first_seen_reference(rows)
        assert [tuple(r) for r in distinct.tolist()] == want_rows
        assert row_of.tolist() == want_of
    assert _row_keys(small) is not None
    assert _row_keys(negative) is None and _row_keys(huge) is None
