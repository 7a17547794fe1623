"""Paper A's replica-batched MHA model against the textbook forward, and the synthetic data."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from mha_oracle import every_position, textbook_attention, textbook_forward
from train_configs import train_config

from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training.config import derive_seed
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas
from memcap.training.step import AutogradStep, select_model

D = 6
EXAMPLES = 20  # drawn for every replica, so each one's data does not depend on its batch
CPU = torch.device("cpu")


def _inputs(replicas: int, batch: int, n: int, seed: int = 0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.rand(replicas, batch, D, generator=g, dtype=dtype),
        torch.rand(replicas, batch, n, D, generator=g, dtype=dtype),
    )


def _random_case(seed: int, padded: bool, one_context: bool, embedded: bool = False):
    """A float64 model of random replica shapes (one per seed), its inputs, targets and
    weights."""
    g = torch.Generator().manual_seed(seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=g))

    R, d_v, classes = draw(2, 5), draw(1, 2), [None, 4][draw(0, 1)]
    n_max = draw(2, 5)
    shapes = [
        MHAShape(
            D,
            draw(1, n_max) if padded else n_max,
            draw(1, 4) if padded else 3,
            draw(1, 5) if padded else 4,
            d_v=d_v,
            classes=classes,
            xavier=bool(draw(0, 1)),
            embedded=embedded,
        )
        for _ in range(R)
    ]
    shapes[0] = replace(shapes[0], n=n_max)
    model = ReplicaMHA(shapes, [seed * 10 + r for r in range(R)]).double()
    with torch.no_grad():  # trained weights, not the init; padding stays zero
        for p in model.parameters():
            p.mul_(1.0 + torch.rand(p.shape, generator=g, dtype=p.dtype))
    batch = draw(1, 7)
    query, context = _inputs(R, batch, n_max, seed, torch.float64)
    if one_context:
        context = context[:, :1].clone()
    context[..., shapes[0].n :, :] += 100.0  # beyond some replicas' n: never read there
    if classes is None:
        targets = torch.rand(R, batch, generator=g, dtype=torch.float64)
    else:
        targets = torch.randint(classes, (R, batch), generator=g)
    weights = torch.rand(R, batch, generator=g, dtype=torch.float64)
    return model, (query, context), targets, weights


def _gradients(model: ReplicaMHA) -> list[torch.Tensor]:
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def _oracle_step(model, inputs, targets, weights, objective):
    """The loss and gradients of the textbook forward, through the same loss."""
    step = AutogradStep(train_config(), CPU)
    step.outputs = lambda m, x: textbook_forward(m, *x)  # the oracle's forward, same loss
    return step(model, inputs, targets, weights, objective)


@pytest.mark.parametrize("embedded", [False, True])
@pytest.mark.parametrize("one_context", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_outputs_losses_and_gradients_are_the_textbook_models(seed, padded, one_context, embedded):
    """Paper A's embedding and positions, or real tokens as they are (``embedded``)."""
    model, inputs, targets, weights = _random_case(seed, padded, one_context, embedded)
    objective = "regression" if model.classes is None else "classification"
    torch.testing.assert_close(model(*inputs), textbook_forward(model, *inputs), rtol=0, atol=1e-10)
    loss, outputs = AutogradStep(train_config(), CPU)(model, inputs, targets, weights, objective)
    grads = _gradients(model)
    want_loss, want_outputs = _oracle_step(model, inputs, targets, weights, objective)
    torch.testing.assert_close(outputs, want_outputs, rtol=0, atol=1e-10)
    torch.testing.assert_close(loss, want_loss, rtol=1e-10, atol=1e-10)
    for (name, p), got, want in zip(
        model.named_parameters(), grads, _gradients(model), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)
        if padded:  # padding: exactly zero gradient
            mask = torch.zeros_like(p, dtype=torch.bool)
            for r, s in enumerate(model.shapes):
                own = {"w_query": (s.H, D, s.d_h), "w_key": (s.H, D, s.d_h)}
                own |= {"w_value": (s.H,), "w_out": (s.H,)}
                mask[(r, *(slice(0, k) for k in own.get(name, ())))] = True
            assert (got[~mask] == 0).all(), name


@pytest.mark.parametrize("kept", [[3, 0, 1], [1, 2], [2]])
def test_replicas_leaving_leave_the_model_of_the_others(kept):
    """Replicas leave: the model and data of those that stay compute what they did."""
    shapes = [MHAShape(D, n, H, 3, classes=4) for n, H in ((3, 2), (4, 1), (2, 3), (4, 2))]
    model = ReplicaMHA(shapes, [0, 1, 2, 3]).double()
    query, context = _inputs(4, 5, 4, dtype=torch.float64)
    data = ReplicaData((query, context), torch.zeros(4, 5), torch.full((4,), 5))
    index = torch.tensor(kept)
    select_model(model, index)
    left = data.select(index)
    want = textbook_forward(model, query[index], context[index])
    torch.testing.assert_close(model(*left.inputs), want, rtol=0, atol=1e-10)


def test_attention_is_the_textbook_models_and_padding_reads_nothing():
    model, (query, context), _, _ = _random_case(1, True, False)
    got = model.attention(query, context)
    for r, (want, s) in enumerate(
        zip(textbook_attention(model, query, context), model.shapes, strict=True)
    ):
        torch.testing.assert_close(got[r, :, : s.H, : s.n], want, rtol=0, atol=1e-12)
        assert (got[r, :, :, s.n :] == 0).all()
        torch.testing.assert_close(want.sum(-1), torch.ones_like(want[..., 0]))


def test_no_position_attends_to_the_query_token():
    model = ReplicaMHA([MHAShape(D, 4, 3, 4, classes=5)] * 2, [0, 1])
    query, context = _inputs(2, 5, 4)
    before = every_position(model, 0, query[0], context[0])[0]
    after = every_position(model, 0, query[0] + torch.randn_like(query[0]), context[0])[0]
    torch.testing.assert_close(after[:, 1:], before[:, 1:])
    assert not torch.allclose(after[:, 0], before[:, 0])
    # identical context tokens and no positions: the output cannot depend on the query
    same = context[:, :, :1].expand_as(context).clone()
    model.positions.zero_()
    out = model(query, same)
    torch.testing.assert_close(model(torch.rand_like(query), same), out)


def test_shapes_of_every_output():
    shapes = [MHAShape(D, 3, 2, 4, classes=5), MHAShape(D, 5, 3, 2, classes=5)]
    model = ReplicaMHA(shapes, [0, 1])
    query, context = _inputs(2, 7, 5)
    assert model(query, context).shape == (2, 7, 5)
    assert model.attention(query, context).shape == (2, 7, 3, 5)
    assert model.embed(query, context)[1].shape == (2, 7, 5, D)
    regression = ReplicaMHA([MHAShape(D, 3, 2, 4)], [0])
    assert regression(*_inputs(1, 7, 3)).shape == (1, 7)


def _replica_data(shapes, seeds, sizes, task):
    n_max = max(s.n for s in shapes)
    queries, contexts, targets = [], [], []
    for shape, seed in zip(shapes, seeds, strict=True):
        data = make_dataset(EXAMPLES, shape.n, D, "random", task, 4, seed).head(max(sizes))
        queries.append(data.queries)
        contexts.append(torch.nn.functional.pad(data.contexts, (0, 0, 0, n_max - shape.n)))
        targets.append(data.targets)
    inputs = (torch.stack(queries), torch.stack(contexts))
    return ReplicaData(inputs, torch.stack(targets), torch.tensor(sizes))


@pytest.mark.parametrize(
    ("task", "batch_size"), [("classification", None), ("classification", 8), ("regression", None)]
)
def test_batched_training_equals_one_model_at_a_time(task, batch_size):
    classes = 4 if task == "classification" else None
    shapes = [MHAShape(D, 3, 1, 3, classes=classes), MHAShape(D, 4, 3, 2, classes=classes)]
    seeds, sizes = [5, 6], [12, 20]
    cfg = train_config(steps=40, lr=1e-2, eval_every=10, batch_size=batch_size, early_stop=False)
    batched = train_replicas(
        ReplicaMHA(shapes, seeds), _replica_data(shapes, seeds, sizes, task), task, cfg, seeds
    )
    for r, (shape, seed, size) in enumerate(zip(shapes, seeds, sizes, strict=True)):
        data = _replica_data([shape], [seed], [size], task)
        single = train_replicas(ReplicaMHA([shape], [seed]), data, task, cfg, [seed])
        np.testing.assert_allclose(batched.loss_curve[:, r], single.loss_curve[:, 0], rtol=1e-4)
        assert batched.memorized[r] == single.memorized[0]


def test_datasets_are_seeded_and_shared_contexts_are_shared():
    shared = make_dataset(10, 3, D, "shared", "classification", 7, seed=4)
    assert shared.contexts.shape == (10, 3, D)
    assert (shared.contexts == shared.contexts[0]).all()
    assert shared.targets.dtype == torch.int64 and int(shared.targets.max()) < 7
    random = make_dataset(10, 3, D, "random", "regression", 7, seed=4)
    assert not torch.equal(random.contexts[0], random.contexts[1])
    assert random.targets.is_floating_point()
    assert ((random.queries >= 0) & (random.queries <= 1)).all()
    again = make_dataset(10, 3, D, "random", "regression", 7, seed=4)
    torch.testing.assert_close(again.contexts, random.contexts)
    assert random.head(4).queries.shape == (4, D)
    assert derive_seed(0, "data", 1) != derive_seed(0, "data", 2)
    assert derive_seed(0, "data", 1) == derive_seed(0, "data", 1)


def test_paper_a_code_init_scales_scores_by_d_and_zeroes_biases():
    ours = ReplicaMHA([MHAShape(D, 3, 2, 4, classes=5)], [0])
    theirs = ReplicaMHA([MHAShape(D, 3, 2, 4, classes=5, xavier=True)], [0])
    assert ours.score_scale.item() == pytest.approx(4**-0.5)
    assert theirs.score_scale.item() == pytest.approx(D**-0.5)
    for name in ("b_embed", "b_out", "b_decode"):
        assert not getattr(theirs, name).any() and getattr(ours, name).any()
    bound = (6.0 / (D + 2 * 4)) ** 0.5  # the query map as one Linear(d, H d_h)
    assert theirs.w_query.abs().max() <= bound < ours.w_query.abs().max() * 10


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_model_runs_on_cuda_in_bf16_within_its_rounding():
    """bfloat16 on CUDA against the float64 textbook forward: the logits within a few units
    of bfloat16's rounding (2⁻⁸) of the logits' scale, gradients within 5%."""
    model, inputs, targets, weights = _random_case(2, True, False)
    objective = "regression" if model.classes is None else "classification"
    cuda = torch.device("cuda")
    fast = ReplicaMHA(model.shapes, [0] * model.replicas).to(cuda)
    fast.load_state_dict(model.state_dict())
    fast = fast.to(torch.bfloat16)
    cast = tuple(
        x.to(cuda, torch.bfloat16) if x.is_floating_point() else x.to(cuda) for x in inputs
    )
    want = textbook_forward(model, *inputs)
    got = fast(*cast).double().cpu()
    assert (got - want).abs().max() <= 8 * 2**-8 * want.abs().max()
    AutogradStep(train_config(), cuda)(fast, cast, targets.to(cuda), weights.to(cuda), objective)
    _oracle_step(model, inputs, targets, weights, objective)
    for p, q in zip(fast.parameters(), model.parameters(), strict=True):
        scale = q.grad.abs().max()
        assert (p.grad.double().cpu() - q.grad).abs().max() <= 0.05 * scale + 1e-6
