"""The engine door checks instead of trusting: a fast step is compared with the model's own
forward and autograd on the first batch, kept where it agrees, and an edited model trains
the edited function."""

import logging

import numpy as np
import pytest
import torch
from train_configs import train_config

from memcap.aot import engine as aot_engine
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tasks import association_task, distribution_task, fixed_sample
from memcap.synthetic import engine as synthetic_engine
from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training import verify
from memcap.training.active import ActiveReplicas
from memcap.training.data import ReplicaData
from memcap.training.engine import CheckedStep, ReferenceStep, choose_step
from memcap.training.loop import train_replicas
from memcap.training.verify import discrepancies

CPU = torch.device("cpu")
D = 8


def _mha_run(task="classification", context="random", padded=True, T=24):
    classes = 5 if task == "classification" else None
    shapes = [MHAShape(D, 4, 3, 4, classes=classes), MHAShape(D, 4, 2, 4, classes=classes)]
    if padded:
        shapes[1] = MHAShape(D, 3, 1, 2, classes=classes)
    queries, contexts, targets = [], [], []
    for r, shape in enumerate(shapes):
        data = make_dataset(T, shape.n, D, context, task, 5, r)
        queries.append(data.queries)
        contexts.append(torch.nn.functional.pad(data.contexts, (0, 0, 0, 4 - shape.n)))
        targets.append(data.targets)
    data = ReplicaData(
        (torch.stack(queries), torch.stack(contexts)), torch.stack(targets), torch.tensor([T, T])
    )
    return shapes, data


def _train_mha(model_class=ReplicaMHA, engine="fast", batch_size=None, steps=40, **kwargs):
    task = kwargs.pop("task", "classification")
    shapes, data = _mha_run(task)
    cfg = train_config(
        steps=steps, lr=2e-2, eval_every=10, batch_size=batch_size, early_stop=False, **kwargs
    )
    model = model_class(shapes, [5, 6])
    step = choose_step(cfg, model, task, CPU, fast=synthetic_engine.FastStep)
    result = train_replicas(model, data, task, cfg, [5, 6], ReplicaMHA.select_replicas, step)
    return step, result


def _aot_data(settings, task="association", sample=None):
    tasks = [
        association_task(s.N, s.S, r) if task == "association" else distribution_task(s.N, s.S, r)
        for r, s in enumerate(settings)
    ]
    if sample is not None:
        tasks = [fixed_sample(t, sample, r) for r, t in enumerate(tasks)]
    return ReplicaData(
        (torch.stack([t.inputs for t in tasks]),),
        torch.stack([t.targets for t in tasks]),
        torch.full((len(settings),), tasks[0].targets.shape[0]),
    )


def _aot_settings(S=2, width=0, variant="code", task="association", N=5):
    model = "mlp" if width else "aot"
    return [
        Setting("t", task, model, N, S, 4, 4, 1 if width else 3, 1, width, 1.0, variant),
        Setting("t", task, model, N, S, 5, 2, 1, 1, width, 1.0, variant),
    ]


def _train_aot(engine="fast", batch_size=8, steps=30, sample=64, **kwargs):
    settings = _aot_settings()
    data = _aot_data(settings, sample=sample)
    cfg = train_config(
        steps=steps, lr=5e-2, eval_every=10, batch_size=batch_size, early_stop=False, **kwargs
    )
    model = ReplicaTransformer(settings, [0, 1])
    step = choose_step(cfg, model, "classification", CPU, fast=aot_engine.FastStep)
    return step, train_replicas(model, data, "classification", cfg, [0, 1], step=step)


def _with_residual(original):
    """Paper A's forward with the query's embedding added to the layer output (a residual
    connection), edited in place as a researcher would."""

    def forward(self, query, context):
        x, _ = self.embed(query, context)
        out = self.layer_output(query, context) + x
        decoded = torch.einsum("rbd,rdc->rbc", out, self.w_decode) + self.b_decode[:, None]
        return decoded.squeeze(-1) if self.classes is None else decoded

    return forward


def _with_first_token_skip(original):
    """Paper B's forward with the first token's embedding read out beside the last
    position's residual (a skip connection from the first position to the logits)."""

    def forward(self, tokens):
        w = self.weights()
        table = self.embedded(w)  # (R, N, D)
        first = torch.gather(table, 1, tokens[..., :1].expand(-1, -1, table.shape[-1]))
        return original(self, tokens) + self.read_out(first, w)

    return forward


def test_discrepancies_weigh_the_fast_difference_against_the_references_rounding():
    gen = torch.Generator().manual_seed(0)
    exact = {"a": torch.randn(50, 40, generator=gen, dtype=torch.float64)}
    exact["bias"] = torch.tensor([1.0, -2.0], dtype=torch.float64)

    def off_by(scale):
        return {
            k: v + scale * torch.randn(v.shape, generator=gen, dtype=v.dtype)
            for k, v in exact.items()
        }

    working = off_by(1e-7)  # the reference's float32 rounding
    working["bias"] = exact["bias"].clone()  # exact by chance: the median floor holds
    same = discrepancies(off_by(1e-15), working, exact, 2.0**-24)
    assert max(d.ratio for d in same) < 1e-6
    changed = off_by(1e-15)
    changed["a"][3, 4] += 1e-3
    worst = max(discrepancies(changed, working, exact, 2.0**-24), key=lambda d: d.ratio)
    assert worst.tensor == "a" and worst.ratio > 10
    assert worst.max_abs == pytest.approx(1e-3, rel=1e-6)


def _worst(model, data, objective, cfg, fast, select=None):
    step = choose_step(cfg, model, objective, CPU, fast=fast)
    assert isinstance(step, CheckedStep)
    active = ActiveReplicas(model, data, cfg, list(range(data.replicas)), select)
    found, _ = verify._compare(step.fast, active, objective, cfg)
    return max(found, key=lambda d: d.ratio)


@pytest.mark.parametrize("precision", ["float32", "bf16"])
@pytest.mark.parametrize(
    ("task", "context", "batch_size"),
    [
        ("classification", "random", None),
        ("classification", "shared", 8),
        ("regression", "random", 8),
        ("regression", "shared", None),
    ],
)
def test_paper_a_fast_step_passes_its_check_with_margin(task, context, batch_size, precision):
    """In float64 the fast step computes the reference's numbers to far within the
    reference's own rounding (measured worst 8e-9 of it)."""
    shapes, data = _mha_run(task, context)
    cfg = train_config(steps=1, lr=1e-2, eval_every=1, batch_size=batch_size, precision=precision)
    worst = _worst(
        ReplicaMHA(shapes, [0, 1]),
        data,
        task,
        cfg,
        synthetic_engine.FastStep,
        ReplicaMHA.select_replicas,
    )
    assert worst.ratio <= 1e-4, worst


@pytest.mark.parametrize("precision", ["float32", "bf16"])
@pytest.mark.parametrize(
    ("S", "width", "variant", "task", "batch_size"),
    [
        (2, 0, "code", "association", None),  # table
        (2, 0, "code", "association", 8),  # one node, without autograd
        (3, 7, "paper", "association", 8),  # one node, per-head attention, MLP
        (1, 0, "code", "association", 8),  # merged heads, S = 1
        (2, 7, "code", "distribution", None),  # table, KL
        (3, 0, "paper", "distribution", 8),  # merged heads, KL
    ],
)
def test_paper_b_fast_step_passes_its_check_with_margin(
    S, width, variant, task, batch_size, precision
):
    settings = _aot_settings(S, width, variant, task)
    data = _aot_data(settings, task)
    cfg = train_config(steps=1, lr=1e-2, eval_every=1, batch_size=batch_size, precision=precision)
    objective = "classification" if task == "association" else "distribution"
    worst = _worst(ReplicaTransformer(settings, [0, 1]), data, objective, cfg, aot_engine.FastStep)
    assert worst.ratio <= 1e-4, worst


@pytest.mark.parametrize("batch_size", [None, 8])
def test_an_edited_paper_a_forward_trains_the_edited_function(monkeypatch, caplog, batch_size):
    """ReplicaMHA.forward edited in place (a residual connection): the fast step no longer
    computes the model, the check says which tensor differs and by how much, and the run
    trains exactly what engine: reference trains."""
    plain_step, plain = _train_mha(batch_size=batch_size)
    assert plain_step.name == "fast"
    monkeypatch.setattr(ReplicaMHA, "forward", _with_residual(ReplicaMHA.forward))
    with caplog.at_level(logging.INFO, logger="memcap.training.verify"):
        step, edited = _train_mha(batch_size=batch_size)
    _, reference = _train_mha(engine="reference", batch_size=batch_size)
    assert isinstance(step.chosen, ReferenceStep) and step.name == "reference"
    (line,) = {r.getMessage() for r in caplog.records if "differs from the" in r.getMessage()}
    assert "relative" in line and "training through the reference step" in line
    np.testing.assert_array_equal(edited.loss_curve, reference.loss_curve)
    np.testing.assert_array_equal(edited.memorized, reference.memorized)
    assert not np.allclose(edited.loss_curve, plain.loss_curve)


def test_an_edited_paper_b_forward_trains_the_edited_function(monkeypatch, caplog):
    original = ReplicaTransformer.forward
    _, plain = _train_aot()
    monkeypatch.setattr(ReplicaTransformer, "forward", _with_first_token_skip(original))
    with caplog.at_level(logging.INFO, logger="memcap.training.verify"):
        step, edited = _train_aot()
    _, reference = _train_aot(engine="reference")
    assert isinstance(step.chosen, ReferenceStep)
    assert "differs from the reference" in caplog.text
    np.testing.assert_array_equal(edited.loss_curve, reference.loss_curve)
    np.testing.assert_array_equal(edited.batch_accuracy, reference.batch_accuracy)
    assert not np.allclose(edited.loss_curve, plain.loss_curve)


def test_a_subclass_that_keeps_the_forward_trains_through_the_fast_step(caplog):
    class Renamed(ReplicaMHA):
        """The same model under another name."""

    with caplog.at_level(logging.INFO, logger="memcap.training.verify"):
        step, _ = _train_mha(Renamed)
    assert step.chosen is step.fast and "checked against the reference" in caplog.text


@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_the_check_leaves_training_as_it_was(precision):
    """The same run with the check and with the fast step handed to the loop unchecked:
    identical loss curves and counts (mini-batches: the check draws no batch)."""

    def run(checked):
        shapes, data = _mha_run()
        cfg = train_config(
            steps=30, lr=2e-2, eval_every=10, batch_size=8, early_stop=False, precision=precision
        )
        model = ReplicaMHA(shapes, [5, 6])
        step = choose_step(cfg, model, "classification", CPU, fast=synthetic_engine.FastStep)
        if not checked:
            step = step.fast
        return train_replicas(
            model, data, "classification", cfg, [5, 6], ReplicaMHA.select_replicas, step
        )

    checked, unchecked = run(True), run(False)
    np.testing.assert_array_equal(checked.loss_curve, unchecked.loss_curve)
    np.testing.assert_array_equal(checked.memorized, unchecked.memorized)


def test_paper_b_check_leaves_shuffled_epochs_as_they_were():
    step, checked = _train_aot(sampling="shuffle")
    settings = _aot_settings()
    cfg = train_config(
        steps=30, lr=5e-2, eval_every=10, batch_size=8, early_stop=False, sampling="shuffle"
    )
    model = ReplicaTransformer(settings, [0, 1])
    unchecked = train_replicas(
        model,
        _aot_data(settings, sample=64),
        "classification",
        cfg,
        [0, 1],
        step=aot_engine.FastStep(cfg, CPU),
    )
    assert step.name == "fast"
    np.testing.assert_array_equal(checked.loss_curve, unchecked.loss_curve)
    np.testing.assert_array_equal(checked.batch_accuracy, unchecked.batch_accuracy)
