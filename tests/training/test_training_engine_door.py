"""The one engine door: the fast steps equal the reference, and a changed model trains through
the reference (the model file is what trains; test_training_verify_step.py checks the check)."""

import logging

import numpy as np
import pytest
import torch
from train_configs import train_config

from memcap.aot import engine as aot_engine
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tasks import association_task, distribution_task
from memcap.synthetic import engine as synthetic_engine
from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training.data import ReplicaData
from memcap.training.engine import ReferenceStep, choose_step
from memcap.training.loop import train_replicas

CPU = torch.device("cpu")
D = 6


class ResidualMHA(ReplicaMHA):
    """Paper A's model with a residual connection: the query's embedding added to the layer's
    output, changed here and nowhere else."""

    def forward(self, query: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        x, _ = self.embed(query, context)
        out = self.layer_output(query, context) + x
        decoded = torch.einsum("rbd,rdc->rbc", out, self.w_decode) + self.b_decode[:, None]
        return decoded.squeeze(-1) if self.classes is None else decoded


def _mha_data(shapes, seeds, sizes, task, context="random"):
    n_max, t_max = max(s.n for s in shapes), max(sizes)
    queries, contexts, targets = [], [], []
    for shape, seed in zip(shapes, seeds, strict=True):
        data = make_dataset(t_max, shape.n, D, context, task, 4, seed)
        queries.append(data.queries)
        contexts.append(torch.nn.functional.pad(data.contexts, (0, 0, 0, n_max - shape.n)))
        targets.append(data.targets)
    inputs = (torch.stack(queries), torch.stack(contexts))
    return ReplicaData(inputs, torch.stack(targets), torch.tensor(sizes))


def _train_mha(model_class, engine, task="classification", batch_size=None, steps=60):
    classes = 4 if task == "classification" else None
    shapes = [MHAShape(D, 3, 1, 3, classes=classes), MHAShape(D, 4, 3, 2, classes=classes)]
    seeds, sizes = [5, 6], [12, 20]
    cfg = train_config(
        steps=steps, lr=2e-2, eval_every=10, batch_size=batch_size, early_stop=False, engine=engine
    )
    model = model_class(shapes, seeds)
    step = choose_step(cfg, model, task, CPU, fast=synthetic_engine.FastStep)
    data = _mha_data(shapes, seeds, sizes, task)
    return step, train_replicas(model, data, task, cfg, seeds, ReplicaMHA.select_replicas, step)


@pytest.mark.parametrize(
    ("task", "batch_size"), [("classification", None), ("classification", 8), ("regression", None)]
)
def test_paper_a_fast_engine_trains_as_the_reference(task, batch_size):
    fast_step, fast = _train_mha(ReplicaMHA, "fast", task, batch_size)
    reference_step, reference = _train_mha(ReplicaMHA, "reference", task, batch_size)
    assert fast_step.name == "fast" and reference_step.name == "reference"
    np.testing.assert_allclose(fast.loss_curve, reference.loss_curve, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(fast.memorized, reference.memorized)
    np.testing.assert_array_equal(fast.fit_step, reference.fit_step)


def test_a_changed_model_trains_through_the_reference_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="memcap.training.verify"):
        step, result = _train_mha(ResidualMHA, "fast", steps=150)
    assert isinstance(step.chosen, ReferenceStep)  # a subclass is checked, and fails
    assert "differs from the reference" in caplog.text and "reference step" in caplog.text
    assert (result.loss_curve[-1] < 0.5 * result.loss_curve[0]).all()  # it learns
    # the residual changes the function: the same weights give other outputs
    shapes = [MHAShape(D, 3, 1, 3, classes=4)]
    plain, residual = ReplicaMHA(shapes, [1]), ResidualMHA(shapes, [1])
    query, context = torch.rand(1, 5, D), torch.rand(1, 5, 3, D)
    assert not torch.allclose(plain(query, context), residual(query, context))


def _aot_run(settings, engine, task="association", batch_size=None, steps=40, sample=None):
    tasks = [
        association_task(s.N, s.S, r) if task == "association" else distribution_task(s.N, s.S, r)
        for r, s in enumerate(settings)
    ]
    data = ReplicaData(
        (torch.stack([t.inputs for t in tasks]),),
        torch.stack([t.targets for t in tasks]),
        torch.full((len(settings),), tasks[0].targets.shape[0]),
    )
    objective = "classification" if task == "association" else "distribution"
    cfg = train_config(
        steps=steps, lr=5e-2, eval_every=10, batch_size=batch_size, early_stop=False, engine=engine
    )
    model = ReplicaTransformer(settings, list(range(len(settings))))
    step = choose_step(cfg, model, objective, CPU, fast=aot_engine.FastStep)
    result = train_replicas(model, data, objective, cfg, list(range(len(settings))), step=step)
    return step, result


def _aot_settings(depth=1, variant="code", S=2):
    return [
        Setting("t", "association", "aot", 5, S, 4, 4, 3, depth, 0, 1.0, variant),
        Setting("t", "association", "aot", 5, S, 4, 2, 1, depth, 0, 1.0, variant),
    ]


@pytest.mark.parametrize(
    ("variant", "task", "batch_size"),
    [("code", "association", None), ("code", "association", 8), ("paper", "distribution", None)],
)
def test_paper_b_fast_engine_trains_as_the_reference(variant, task, batch_size):
    settings = _aot_settings(variant=variant)
    fast_step, fast = _aot_run(settings, "fast", task, batch_size)
    reference_step, reference = _aot_run(settings, "reference", task, batch_size)
    assert fast_step.name == "fast" and reference_step.name == "reference"
    np.testing.assert_allclose(fast.loss_curve, reference.loss_curve, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(fast.memorized, reference.memorized)


def test_a_deeper_transformer_trains_through_the_reference(caplog):
    with caplog.at_level(logging.INFO, logger="memcap.training.engine"):
        step, result = _aot_run(_aot_settings(depth=2), "fast", steps=60)
    assert isinstance(step, ReferenceStep) and "2 layers" in caplog.text
    assert (result.loss_curve[-1] < result.loss_curve[0]).all()
