"""Paper B's fast step: one route per batch shape, chosen once and logged; a mini-batch step
passes through at most ten modules."""

import logging
import sys
from pathlib import Path

import pytest
import torch
from train_configs import train_config

from memcap.aot import engine as aot_engine
from memcap.aot.engine import DIRECT, MERGED, ONE_NODE, TABLE, FastStep, route
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tasks import association_task, fixed_sample
from memcap.training.data import ReplicaData
from memcap.training.engine import choose_step
from memcap.training.loop import train_replicas

CPU = torch.device("cpu")


def _settings(N=5, S=2, heads=(3, 1)):
    return [Setting("t", "association", "aot", N, S, 4, 4, h, 1, 0, 1.0, "code") for h in heads]


@pytest.mark.parametrize(
    ("rows", "mini_batch", "one_node", "direct", "expected"),
    [
        (100, False, False, False, TABLE),  # an evaluation or full batch of every input
        (100, True, True, True, DIRECT),  # a mini-batch of 100 distinct rows (counted batches)
        (400, True, True, True, TABLE),  # the table computes a quarter of the rows
        (399, False, False, False, MERGED),
        (256, True, True, False, ONE_NODE),  # compiled: the one node through autograd
        (256, True, False, False, MERGED),  # bfloat16, the distribution task, S = 1
    ],
)
def test_the_route_is_a_function_of_the_shape_and_the_config(
    rows, mini_batch, one_node, direct, expected
):
    assert route(rows, 100, mini_batch, one_node, direct) == expected


def test_a_full_table_in_any_order_gives_the_models_logits():
    """B = N^S rows take the table, gathered by sequence: the order of the rows is not read."""
    model = ReplicaTransformer(_settings(), [0, 1])
    task = association_task(5, 2, 0)
    order = torch.randperm(25, generator=torch.Generator().manual_seed(0))
    tokens = task.inputs[order].expand(2, -1, -1)
    step = FastStep(train_config(), CPU)
    torch.testing.assert_close(step.outputs(model, (tokens,)), model(tokens))
    assert step._routes == {(False, 25): TABLE}


def test_each_shape_is_routed_once_and_logged(caplog):
    """A mini-batch run logs its training route and its evaluation route once each."""
    settings = _settings()
    tasks = [fixed_sample(association_task(5, 2, r), 64, r) for r in range(2)]
    data = ReplicaData(
        (torch.stack([t.inputs for t in tasks]),),
        torch.stack([t.targets for t in tasks]),
        torch.full((2,), 64),
    )
    cfg = train_config(steps=12, lr=1e-2, eval_every=4, batch_size=8, early_stop=False)
    model = ReplicaTransformer(settings, [0, 1])
    step = choose_step(cfg, model, "classification", CPU, fast=aot_engine.FastStep)
    with caplog.at_level(logging.INFO, logger="memcap.aot.engine"):
        train_replicas(model, data, "classification", cfg, [0, 1], step=step)
    routes = [r.getMessage() for r in caplog.records if "fast step:" in r.getMessage()]
    assert len(routes) == 2, routes
    assert "mini-batches of 8 examples per replica (N^S = 25)" in routes[0] + routes[1]
    assert DIRECT in " ".join(routes) and "evaluations of 64" in " ".join(routes)


def _modules_per_step(cfg, data, model, steps):
    """The memcap source files each training step passes through (between two calls of the
    update), the loop's own file included."""
    root = Path(aot_engine.__file__).parents[1]
    per_step: list[set[str]] = []

    def profile(frame, event, _arg):
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(str(root)):
            return
        name = Path(path).relative_to(root).as_posix()
        if name == "training/update.py" and frame.f_code.co_name == "__call__":
            per_step.append({"training/loop.py"})
        elif per_step:
            per_step[-1].add(name)

    step = choose_step(cfg, model, "classification", CPU, fast=aot_engine.FastStep)
    sys.setprofile(profile)
    try:
        train_replicas(model, data, "classification", cfg, [0, 1], step=step)
    finally:
        sys.setprofile(None)
    assert len(per_step) == steps
    return per_step[1:-1]  # the last one runs into the final evaluation


@pytest.mark.parametrize("counted", [False, True])
def test_a_mini_batch_step_passes_through_at_most_ten_modules(counted):
    """Paper B's mini-batch step, the last batches' accuracy counted, as the default run
    trains it (a sample drawn from the prior; ``counted``: few distinct inputs)."""
    N = 3 if counted else 6
    tasks = [fixed_sample(association_task(N, 2, r), 256, r) for r in range(2)]
    data = ReplicaData(
        (torch.stack([t.inputs for t in tasks]),),
        torch.stack([t.targets for t in tasks]),
        torch.full((2,), 256),
    )
    steps = 8
    cfg = train_config(
        steps=steps,
        lr=1e-2,
        eval_every=100,
        batch_size=32,
        early_stop=False,
        sampling="shuffle",
        last_batches=steps,
    )
    model = ReplicaTransformer(_settings(N=N), [0, 1])
    per_step = _modules_per_step(cfg, data, model, steps)
    for modules in per_step:
        assert len(modules) <= 10, sorted(modules)
    assert "aot/step.py" in per_step[0] and "training/adam.py" in per_step[0]
