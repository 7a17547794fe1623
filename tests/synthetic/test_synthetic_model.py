"""Paper A's replica-batched MHA model and the synthetic data."""

import numpy as np
import pytest
import torch
from train_configs import train_config

from memcap.synthetic import folded, folded_core, folded_core_head_major, folded_core_shared
from memcap.synthetic.engine import FastStep
from memcap.synthetic.head_slots import SlotCache, head_slots, separate_slots
from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas
from memcap.training.objectives import example_losses
from memcap.training.seeds import derive_seed

D = 6
EXAMPLES = 20  # drawn for every replica, so each one's data does not depend on its batch


def _inputs(replicas: int, batch: int, n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(replicas, batch, D, generator=g), torch.rand(
        replicas, batch, n, D, generator=g
    )


def _folded_case(
    value_dim: int, classes: int | None, shared: bool, seed: int, one_context: bool = False
):
    """Four replicas of different shapes in float64, replica 0 with padded context positions;
    ``shared``: replicas 0, 2 and 3 read one input, so their heads are stacked (2 + 1 + 3 rows);
    ``one_context``: every example of a replica reads one context (a batch axis of size 1)."""
    shapes = [
        MHAShape(D, 3, 2, 2, value_dim=value_dim, classes=classes),
        MHAShape(D, 5, 4, 6, value_dim=value_dim, classes=classes),
        MHAShape(D, 4, 1, 3, value_dim=value_dim, classes=classes, xavier=True),
        MHAShape(D, 5, 3, 2, value_dim=value_dim, classes=classes),
    ]
    model = ReplicaMHA(shapes, [1, 2, 3, 4]).double()
    query, context = (x.double() for x in _inputs(4, 7, 5, seed=seed))
    if one_context:
        context = context[:, :1].clone()
    context[0, :, 3:] = 100.0
    step = FastStep(train_config(), torch.device("cpu"))
    if shared:
        query[2:], context[2:] = query[0], context[0]
        assert step.slots.get(query, context, [2, 4, 1, 3], 4)[0].groups == 2
    return model, step, query, context


def _assert_same_gradients(got: torch.Tensor, want: torch.Tensor, model: ReplicaMHA) -> None:
    """Two scalar losses of ``model`` have equal gradients for every parameter."""
    params = list(model.parameters())
    for a, b in zip(
        torch.autograd.grad(got, params), torch.autograd.grad(want, params), strict=True
    ):
        torch.testing.assert_close(a, b)


@pytest.fixture(params=[folded_core, folded_core_head_major], ids=["n_S", "S_n"])
def core(request, monkeypatch):
    """Each per-example layout in turn, whatever :func:`folded.core_for` would pick."""
    monkeypatch.setattr(folded, "core_for", lambda slots, n: request.param)
    return request.param


def forward_all(model: ReplicaMHA, query: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    """The MHA layer's output at every position, (R, B, 1 + n_max, d): the plain masked
    attention (every position attends to the context tokens, none to token 0), of which
    :meth:`ReplicaMHA.layer_output` is the position-0 row computed cheaply."""
    x, e = model.embed(query, context)
    tokens = torch.cat([x[:, :, None], e], dim=2)  # (R, B, 1 + n, d)
    w_query, w_key, w_value = model._projections()
    q = torch.einsum("rbtd,rhde->rbhte", tokens, w_query)
    k = torch.einsum("rbtd,rhde->rbhte", tokens, w_key)
    v = torch.einsum("rbtd,rhdv->rbhtv", tokens, w_value)
    scores = torch.einsum("rbhse,rbhte->rbhst", q, k) * model.score_scale[:, None, None, None, None]
    readable = torch.cat([torch.zeros_like(model.context_mask[:, :1]), model.context_mask], 1)
    scores = scores.masked_fill(~readable[:, None, None, None, :], float("-inf"))
    heads = torch.einsum("rbhst,rbhtv->rbhsv", torch.softmax(scores, -1), v)
    return torch.einsum("rbhsv,rhvd->rbsd", heads, model.w_out) + model.b_out[:, None, None]


def test_shapes_of_every_output():
    shapes = [MHAShape(D, 3, 2, 4, classes=5), MHAShape(D, 5, 3, 2, classes=5)]
    model = ReplicaMHA(shapes, [0, 1])
    query, context = _inputs(2, 7, 5)
    assert model(query, context).shape == (2, 7, 5)
    assert model.attention(query, context).shape == (2, 7, 3, 5)
    assert model.layer_output(query, context).shape == (2, 7, D)
    assert forward_all(model, query, context).shape == (2, 7, 6, D)
    regression = ReplicaMHA([MHAShape(D, 3, 2, 4)], [0])
    assert regression(*_inputs(1, 7, 3)).shape == (1, 7)


def test_no_position_attends_to_the_query_token():
    model = ReplicaMHA([MHAShape(D, 4, 3, 4, classes=5)] * 2, [0, 1])
    query, context = _inputs(2, 5, 4)
    before = forward_all(model, query, context)
    after = forward_all(model, query + torch.randn_like(query), context)
    torch.testing.assert_close(after[:, :, 1:], before[:, :, 1:])
    assert not torch.allclose(after[:, :, 0], before[:, :, 0])


def test_query_output_is_a_convex_combination_of_its_context():
    model = ReplicaMHA([MHAShape(D, 4, 3, 4, value_dim=2, classes=5)], [3])
    query, context = _inputs(1, 5, 4)
    attention = model.attention(query, context)  # (1, 5, H, n)
    assert (attention >= 0).all()
    torch.testing.assert_close(attention.sum(-1), torch.ones(1, 5, 3))
    _, embedded = model.embed(query, context)
    mixed = torch.einsum("rbhn,rbnd->rbhd", attention, embedded)
    values = torch.einsum("rbhd,rhdv->rbhv", mixed, model.w_value)
    expected = torch.einsum("rbhv,rhvd->rbd", values, model.w_out) + model.b_out[:, None]
    torch.testing.assert_close(model.layer_output(query, context), expected)
    torch.testing.assert_close(forward_all(model, query, context)[:, :, 0], expected)
    # Identical context tokens: the output cannot depend on the query at all.
    same = context[:, :, :1].expand_as(context).clone()
    model.positions.zero_()
    out = model.layer_output(query, same)
    torch.testing.assert_close(model.layer_output(torch.rand_like(query), same), out)


def test_padded_replica_equals_its_own_model_and_padding_gets_no_gradient():
    small, large = MHAShape(D, 3, 2, 2, classes=4), MHAShape(D, 5, 4, 6, classes=4)
    padded = ReplicaMHA([small, large], [11, 12])
    alone = ReplicaMHA([small], [11])
    query, context = _inputs(2, 6, 5)
    context_small = context[:1, :, :3]
    torch.testing.assert_close(padded(query, context)[:1], alone(query[:1], context_small))
    context[0, :, 3:] = 100.0  # positions beyond the replica's n are never read
    torch.testing.assert_close(padded(query, context)[:1], alone(query[:1], context_small))
    padded(query, context).sum().backward()
    assert padded.w_query.grad[0, 2:].abs().sum() == 0  # heads beyond H = 2
    assert padded.w_key.grad[0, :, :, 2:].abs().sum() == 0  # dimensions beyond d_h = 2
    assert padded.w_out.grad[0, 2:].abs().sum() == 0


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


@pytest.mark.parametrize("one_context", [False, True])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize(("value_dim", "classes"), [(1, 5), (2, 5), (1, None)])
def test_folded_forward_and_gradients_equal_the_plain_form(
    value_dim, classes, shared, one_context, core
):
    model, step, query, context = _folded_case(value_dim, classes, shared, 0, one_context)
    fixed = folded._fixed(model, query, context, step.slots)
    assert (fixed.core is folded_core_shared) == one_context
    folded_out, plain = step.outputs(model, (query, context)), model(query, context)
    torch.testing.assert_close(folded_out, plain)
    weights = torch.rand_like(plain)  # a loss that weighs every output differently
    _assert_same_gradients((folded_out * weights).sum(), (plain * weights).sum(), model)
    with pytest.raises(ValueError, match="no gradient for its inputs"):
        step.outputs(model, (query.requires_grad_(), context))


@pytest.mark.parametrize("one_context", [False, True])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize(("value_dim", "classes"), [(1, 5), (2, 5), (1, None)])
def test_folded_loss_and_gradients_equal_the_plain_forms(
    value_dim, classes, shared, one_context, core
):
    model, step, query, context = _folded_case(value_dim, classes, shared, 1, one_context)
    objective = "regression" if classes is None else "classification"
    g = torch.Generator().manual_seed(2)
    targets = (
        torch.rand(4, 7, generator=g, dtype=torch.float64)
        if classes is None
        else torch.randint(classes, (4, 7), generator=g)
    )
    weights = torch.rand(4, 7, generator=g, dtype=torch.float64)
    loss, outputs = step(model, (query, context), targets, weights, objective)
    fast_grads = [p.grad.clone() for p in model.parameters()]
    plain = model(query, context)
    plain_loss = (example_losses(plain, targets, objective) * weights).sum(1)
    torch.testing.assert_close(outputs, plain.detach())
    torch.testing.assert_close(loss, plain_loss.detach())
    assert not outputs.requires_grad and not loss.requires_grad
    plain_grads = torch.autograd.grad(plain_loss.sum(), list(model.parameters()))
    for fast, want in zip(fast_grads, plain_grads, strict=True):
        torch.testing.assert_close(fast, want)
    with pytest.raises(ValueError, match="does not fit"):
        step(
            model, (query, context), targets, weights, "regression" if classes else "classification"
        )


def test_core_for_picks_head_major_for_few_heads_or_long_contexts():
    assert folded.core_for(2, 16) is folded_core_head_major  # the context size sweep
    assert folded.core_for(48, 16) is folded_core_head_major
    assert folded.core_for(8, 8) is folded_core_head_major
    assert folded.core_for(21, 8) is folded_core  # the heads sweep
    assert folded.core_for(2, 4) is folded_core


def test_head_slots_group_only_identical_inputs_and_drop_padded_heads():
    query, context = _inputs(4, 3, 2)
    query[1], context[1] = query[0], context[0]
    query[2] = query[0]  # same queries, other contexts: not the same inputs
    slots = head_slots(query, context, H=[2, 1, 3, 3], max_H=3)
    assert slots.groups == 3 and slots.slots == 3 and not slots.trivial
    assert slots.first.tolist() == [0, 2, 3]
    # group 0 stacks replica 0's heads 0, 1 and replica 1's head 0; padded heads → G·S
    assert slots.source.tolist() == [0, 1, 3, 6, 7, 8, 9, 10, 11]
    assert slots.target.tolist() == [0, 1, 9, 2, 9, 9, 3, 4, 5, 6, 7, 8]
    cache = SlotCache()
    assert cache.get(query, context, [2, 1, 3, 3], 3)[0].groups == 3
    context[2] = context[0]  # changed in place: grouped anew
    assert cache.get(query, context, [2, 1, 3, 3], 3)[0].groups == 2


def test_separate_slots_are_what_grouping_finds_for_inputs_that_all_differ():
    query, context = _inputs(4, 3, 2)
    found = head_slots(query, context, H=[2, 1, 3, 3], max_H=3)
    separate = separate_slots([2, 1, 3, 3], 3, query.device)
    assert found.trivial and separate.trivial and found.slots == separate.slots
    for name in ("first", "source", "target", "head"):
        assert torch.equal(getattr(found, name), getattr(separate, name))
    query[1], context[1] = query[0], context[0]  # separate: never looked at
    got = SlotCache(separate=True).get(query, context, [2, 1, 3, 3], 3)
    want = SlotCache().get(query[[0, 1, 2, 3]].clone(), context.clone(), [2, 1, 3, 3], 3)
    assert got[0].trivial and not want[0].trivial
    torch.testing.assert_close(got[1], torch.cat([query, torch.ones(4, 3, 1)], -1))
    torch.testing.assert_close(got[3], context)
