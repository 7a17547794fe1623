"""The training step replayed as a CUDA graph computes what the eager step computes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from train_configs import train_config

from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas

D = 8


def _run(device, cuda_graph, batch_size, precision="float32", leave=False, steps=40):
    shapes = [MHAShape(D, 3, 1, 3, classes=4), MHAShape(D, 4, 3, 2, classes=4)]
    seeds, sizes = [5, 6], [12, 20]
    cfg = train_config(
        steps=steps, lr=2e-2, eval_every=10, batch_size=batch_size, early_stop=False,
        cuda_graph=cuda_graph, precision=precision, leave_when_fit=leave,
    )  # fmt: skip
    model = ReplicaMHA(shapes, seeds).to(device)
    queries, contexts, targets = [], [], []
    for shape, seed in zip(shapes, seeds, strict=True):
        data = make_dataset(max(sizes), shape.n, D, "random", "classification", 4, seed)
        queries.append(data.queries)
        contexts.append(torch.nn.functional.pad(data.contexts, (0, 0, 0, 4 - shape.n)))
        targets.append(data.targets)
    data = ReplicaData(
        (torch.stack(queries).to(device), torch.stack(contexts).to(device)),
        torch.stack(targets).to(device),
        torch.tensor(sizes, device=device),
    )
    result = train_replicas(model, data, "classification", cfg, seeds)
    return result, model


def test_cuda_graph_is_ignored_with_a_log_line_off_cuda(caplog):
    with caplog.at_level(logging.INFO, logger="memcap.training.loop"):
        graphed, _ = _run(torch.device("cpu"), True, 8, steps=12)
    eager, _ = _run(torch.device("cpu"), False, 8, steps=12)
    assert "cuda_graph has no effect on cpu" in caplog.text
    assert (graphed.loss == eager.loss).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    ("batch_size", "precision", "leave"),
    [(8, "float32", False), (None, "float32", False), (8, "bf16", False), (8, "float32", True)],
)
def test_graphed_steps_train_as_the_eager_steps(batch_size, precision, leave, caplog):
    cuda = torch.device("cuda")
    with caplog.at_level(logging.INFO, logger="memcap.training.graph"):
        graphed, graphed_model = _run(cuda, True, batch_size, precision, leave)
    assert "captured as a CUDA graph" in caplog.text and "capture failed" not in caplog.text
    eager, eager_model = _run(cuda, False, batch_size, precision, leave)
    np.testing.assert_allclose(graphed.loss_curve, eager.loss_curve, rtol=1e-4, atol=1e-6)
    assert (graphed.memorized == eager.memorized).all()
    for a, b in zip(graphed_model.parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
