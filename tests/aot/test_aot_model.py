"""The replica-batched AoT / MLP-Transformer, its tasks and its training (tiny sizes)."""

import math

import numpy as np
import pytest
import torch
from torch import nn
from train_configs import train_config

from memcap.aot.engine import FastStep, direct_step
from memcap.aot.merged import MergedAttention, merged_logits
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting, mlp_width, parameter_count
from memcap.aot.tables import table_logits
from memcap.aot.tasks import (
    all_sequences,
    association_task,
    distribution_task,
    sequence_index,
)
from memcap.training.data import ReplicaData
from memcap.training.evaluation import evaluate
from memcap.training.loop import train_replicas
from memcap.training.objectives import example_losses


def _setting(model="aot", N=5, S=2, d=4, d_h=3, H=2, depth=1, width=0, task="association"):
    return Setting("t", task, model, N, S, d, d_h, H, depth, width)


def _tokens(R: int, N: int, S: int) -> torch.Tensor:
    return all_sequences(N, S).expand(R, -1, -1)


def _fast() -> FastStep:
    return FastStep(train_config(), torch.device("cpu"))


def test_shapes_of_every_path():
    model = ReplicaTransformer([_setting(), _setting(H=3)], [0, 1])
    tokens = _tokens(2, 5, 2)[:, :7]
    assert model(tokens).shape == (2, 7, 5)
    assert model.sequence_logits(tokens).shape == (2, 7, 2, 5)
    assert table_logits(model, all_sequences(5, 2)).shape == (2, 25, 5)


@pytest.mark.parametrize("depth", [1, 2])
def test_causal_mask_later_tokens_do_not_change_earlier_outputs(depth):
    model = ReplicaTransformer([_setting(S=4, depth=depth)], [3])
    tokens = torch.tensor([[[0, 1, 2, 3]]])
    changed = tokens.clone()
    changed[..., 3] = 4
    before, after = model.sequence_logits(tokens), model.sequence_logits(changed)
    torch.testing.assert_close(before[:, :, :3], after[:, :, :3])
    assert (before[:, :, 3] - after[:, :, 3]).abs().max() > 1e-4


@pytest.mark.parametrize("S", [1, 2, 3])
def test_table_path_matches_per_example_path_with_padding(S):
    settings = [
        _setting(N=4, S=S, d=5, d_h=5, H=3),
        _setting(N=4, S=S, d=3, d_h=2, H=1),
        _setting("mlp", N=4, S=S, d=4, d_h=4, H=1, width=6),
    ]
    model = ReplicaTransformer(settings, [0, 1, 2])
    assert model.padded
    tokens = _tokens(3, 4, S)
    fast = _fast()
    torch.testing.assert_close(fast.outputs(model, (tokens,)), model(tokens))
    shuffled = tokens[:, torch.randperm(tokens.shape[1])]  # not the table order: merged heads
    torch.testing.assert_close(fast.outputs(model, (shuffled,)), model(shuffled))
    many = torch.cat([shuffled] * 4, 1)  # four times the table: its rows
    torch.testing.assert_close(fast.outputs(model, (many,)), model(many))


def test_padded_replicas_equal_unpadded_models():
    settings = [_setting(d=6, d_h=6, H=4), _setting(d=4, d_h=2, H=1), _setting(d=5, d_h=3, H=2)]
    padded = ReplicaTransformer(settings, [10, 11, 12])
    tokens = _tokens(3, 5, 2)
    out = padded(tokens)
    for r, s in enumerate(settings):
        alone = ReplicaTransformer([s], [10 + r])
        torch.testing.assert_close(out[r : r + 1], alone(tokens[:1]))


def parameter_counts(model: ReplicaTransformer) -> list[int]:
    """Trainable parameters of each replica (its unpadded entries)."""
    if not model.padded:
        return [sum(p[0].numel() for p in model.parameters())] * len(model.settings)
    masks = [getattr(model, f"{name}_mask") for name in model.names]
    return [int(sum(m[r].sum() for m in masks)) for r in range(len(model.settings))]


def test_parameter_counts_match_a_hand_count():
    # N=5, S=2, d=4, d_h=3, H=2: token 5*4 + position 2*4 + heads 2*(3*3*4 + 4*3) + unembed 5*4
    aot = _setting()
    assert parameter_count(aot) == 20 + 8 + 2 * (36 + 12) + 20 == 144
    # one head (d_h = d = 4) plus MLP of width 6: W_1 4*6 + bias 6 + W_2 6*4
    mlp = _setting("mlp", d_h=4, H=1, width=6)
    assert parameter_count(mlp) == 20 + 8 + (48 + 16) + (24 + 6 + 24) + 20 == 166
    for s in (aot, mlp, _setting(depth=2)):
        assert parameter_counts(ReplicaTransformer([s], [0])) == [parameter_count(s)]
    padded = ReplicaTransformer([aot, mlp], [0, 1])
    assert parameter_counts(padded) == [144, 166]


def test_matched_mlp_width_equals_aot_parameters_up_to_the_bias():
    for d, heads in [(7, 6), (10, 11), (13, 21)]:
        aot = _setting(N=70, d=d, d_h=d, H=heads)
        width = mlp_width(d, heads)
        mlp = _setting("mlp", N=70, d=d, d_h=d, H=1, width=width)
        assert parameter_count(mlp) - parameter_count(aot) == width


def test_sequence_index_inverts_enumeration():
    seqs = all_sequences(3, 3)
    assert seqs.shape == (27, 3)
    assert torch.equal(sequence_index(seqs, 3), torch.arange(27))
    assert seqs[5].tolist() == [0, 1, 2]


def test_tasks_are_seeded_and_well_formed():
    a, b = association_task(6, 2, seed=1), association_task(6, 2, seed=1)
    assert torch.equal(a.targets, b.targets) and a.targets.shape == (36,)
    assert not torch.equal(a.targets, association_task(6, 2, seed=2).targets)
    hot = distribution_task(6, 2, seed=0, temperature=3.0)
    cold = distribution_task(6, 2, seed=0, temperature=0.3)
    for task in (hot, cold):
        assert torch.allclose(task.targets.sum(-1), torch.ones(36))
        assert (task.targets > 0).all()  # full support
    assert 0 < cold.entropy < hot.entropy < math.log(6)


class _Oracle(nn.Module):
    """Outputs log π (or uniform logits) for the task's inputs; one dummy replica parameter."""

    def __init__(self, probs: torch.Tensor, N: int, uniform: bool = False) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1, 1))
        self.probs, self.N, self.uniform = probs, N, uniform

    def forward(self, tokens):
        rows = sequence_index(tokens, self.N)
        logits = self.probs[rows].log()
        return torch.zeros_like(logits) if self.uniform else logits


def test_kl_is_zero_for_the_exact_distribution_and_log_n_minus_entropy_for_uniform():
    task = distribution_task(4, 2, seed=0)
    data = ReplicaData((task.inputs[None],), task.targets[None], torch.tensor([16]))
    exact = evaluate(_Oracle(task.targets, 4), data, "distribution", None)
    assert float(exact["kl"][0]) == pytest.approx(0.0, abs=1e-6)
    assert float(exact["accuracy"][0]) == 1.0
    uniform = evaluate(_Oracle(task.targets, 4, uniform=True), data, "distribution", None)
    assert float(uniform["kl"][0]) == pytest.approx(math.log(4) - task.entropy, abs=1e-5)


def test_tiny_aot_memorizes_a_tiny_table():
    # capacity H*d_h + d = 4*8 + 8 = 40 >= T0 = 16 associations
    setting = _setting(N=4, S=2, d=8, d_h=8, H=4)
    task = association_task(4, 2, seed=0)
    data = ReplicaData((task.inputs[None],), task.targets[None], torch.tensor([16]))
    cfg = train_config(steps=400, lr=0.05, warmup_frac=0.0, schedule="constant", eval_every=20)
    result = train_replicas(ReplicaTransformer([setting], [0]), data, "classification", cfg, [0])
    assert result.accuracy[0] == 1.0
    assert (result.steps_run < 400).all()


@pytest.mark.parametrize("batch_size", [None, 8])
def test_batched_padded_training_equals_single_replica_training(batch_size):
    settings = [_setting(N=4, d=6, d_h=6, H=3), _setting(N=4, d=4, d_h=2, H=1)]
    seeds = [5, 6]
    tasks = [association_task(4, 2, seed) for seed in seeds]

    def data(idx):
        return ReplicaData(
            (torch.stack([tasks[i].inputs for i in idx]),),
            torch.stack([tasks[i].targets for i in idx]),
            torch.full((len(idx),), 16),
        )

    cfg = train_config(steps=30, lr=0.03, eval_every=10, batch_size=batch_size, early_stop=False)
    batched = train_replicas(
        ReplicaTransformer(settings, seeds), data([0, 1]), "classification", cfg, seeds
    )
    for r, (s, seed) in enumerate(zip(settings, seeds, strict=True)):
        single = train_replicas(
            ReplicaTransformer([s], [seed]), data([r]), "classification", cfg, [seed]
        )
        np.testing.assert_allclose(batched.loss_curve[:, r], single.loss_curve[:, 0], rtol=1e-4)
        assert batched.memorized[r] == single.memorized[0]


def _authors(model="aot", N=7, S=2, d=4, d_h=3, H=2, width=0):
    return Setting("t", "association", model, N, S, d, d_h, H, 1, width, 1.0, "code")


@pytest.mark.parametrize("S", [2, 3])
def test_authors_variant_paths_agree_with_padding(S):
    settings = [
        _authors(S=S, d=5, d_h=5, H=3),
        _authors(S=S, d=6, d_h=3, H=1),
        _authors(S=S, d=4, d_h=4, H=2),
    ]
    model = ReplicaTransformer(settings, [0, 1, 2])
    tokens = torch.randint(7, (3, 5, S), generator=torch.Generator().manual_seed(0))
    reference = model(tokens)
    torch.testing.assert_close(merged_logits(model, tokens), reference)
    rows = sequence_index(tokens, 7)[..., None].expand(-1, -1, 7)
    table = table_logits(model, all_sequences(7, S))
    torch.testing.assert_close(torch.gather(table, 1, rows), reference)
    for r, s in enumerate(settings):
        alone = ReplicaTransformer([s], [r])
        torch.testing.assert_close(merged_logits(alone, tokens[r : r + 1]), reference[r : r + 1])


def test_authors_variant_is_their_stack_of_one_head_multihead_attentions():
    """Heads of nn.MultiheadAttention(d_h, 1) on a residual stream, then a biased unembedding."""
    model = ReplicaTransformer([_authors(N=6, d=4, d_h=4, H=2)], [0])
    w = {name: value[0] for name, value in model.weights().items()}
    tokens = torch.tensor([[1, 4], [2, 2], [5, 0]])
    x = w["embed"][tokens] + w["pos"]
    out = x.clone()
    causal = torch.ones(2, 2, dtype=torch.bool).triu(1)
    for h in range(2):
        head = nn.MultiheadAttention(4, 1, batch_first=True)
        with torch.no_grad():
            head.in_proj_weight.copy_(torch.cat([w[k][0, h] for k in ("w_q", "w_k", "w_v")]))
            head.in_proj_bias.copy_(torch.cat([w[k][0, h] for k in ("b_q", "b_k", "b_v")]))
            head.out_proj.weight.copy_(w["w_o"][0, h])
            head.out_proj.bias.copy_(w["b_o"][0, h])
        out = out + head(x, x, x, attn_mask=causal, need_weights=False)[0]
    expected = out[:, -1] @ w["unembed"].T + w["unembed_bias"]
    torch.testing.assert_close(model(tokens[None])[0], expected)


def test_authors_variant_maps_d_to_d_h_only_when_they_differ():
    same = ReplicaTransformer([_authors(d=4, d_h=4)], [0])
    assert "proj" not in same.names
    mixed = ReplicaTransformer([_authors(d=4, d_h=4), _authors(d=6, d_h=3)], [0, 1])
    proj = mixed.weights()["proj"]
    torch.testing.assert_close(proj[0, :4, :4], torch.eye(4))  # fixed identity
    assert parameter_counts(mixed) == [parameter_count(s) for s in mixed.settings]
    assert (
        parameter_count(_authors(d=6, d_h=3))
        == 7 * 6 + 3 * 6 + 2 * 3 + 2 * (4 * 9 + 12) + 7 * 3 + 7
    )


@pytest.mark.parametrize("variant", ["paper", "code"])
@pytest.mark.parametrize("S", [1, 2, 3])
def test_merged_heads_path_has_the_plain_models_logits_and_gradients(variant, S):
    """merged_logits (merged head matrices) against autograd through the model's forward."""
    settings = [
        Setting("t", "association", "aot", 6, S, 5, 5, 3, 1, 0, 1.0, variant),
        Setting("t", "association", "aot", 6, S, 6, 3, 1, 1, 0, 1.0, variant),
        Setting("t", "association", "mlp", 6, S, 4, 4, 1, 1, 7, 1.0, variant),
    ]
    model = ReplicaTransformer(settings, [0, 1, 2])
    _nonzero_biases(model)
    tokens = torch.randint(6, (3, 9, S), generator=torch.Generator().manual_seed(0))
    targets = torch.randint(6, (3, 9), generator=torch.Generator().manual_seed(2))

    def logits_and_grads(logits_of):
        model.zero_grad(set_to_none=True)
        logits = logits_of(tokens)
        nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
        # with S = 1 the fast path never touches W_Q, W_K (their gradient is zero anyway)
        grads = {
            n: torch.zeros_like(p) if p.grad is None else p.grad
            for n, p in model.named_parameters()
        }
        return logits.detach(), grads

    fast, fast_grads = logits_and_grads(lambda t: merged_logits(model, t))
    plain, plain_grads = logits_and_grads(model)
    torch.testing.assert_close(fast, plain)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, msg=name)
        if hasattr(model, f"{name}_mask"):  # padded entries get exactly zero gradient
            assert (fast_grads[name][getattr(model, f"{name}_mask") == 0] == 0).all(), name


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("earlier", [1, 3])
@pytest.mark.parametrize("H", [1, 3, 5])  # per head below D' heads, merged from D' on
def test_merged_attention_backward_is_the_derivative_of_its_forward(bias, earlier, H):
    """The hand-written backward against finite differences (float64)."""
    gen = torch.Generator().manual_seed(0)
    R, D, B = 2, 3, 4

    def arg(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    args = (arg(R, D, B), arg(R, D, earlier, B), arg(R, H, D, D + bias), arg(R, H, D, D + bias))
    assert torch.autograd.gradcheck(lambda *a: MergedAttention.apply(*a, bias), args)


@pytest.mark.parametrize("variant", ["paper", "code"])
@pytest.mark.parametrize("S", [1, 2, 3])
@pytest.mark.parametrize("mlp", [False, True])
def test_fused_step_has_the_plain_models_loss_logits_and_gradients(variant, S, mlp):
    """The fast step's loss (one node from the token lookup to the loss) against autograd
    through the model's forward and the loop's cross-entropy, padded replicas with and
    without an MLP; the AoT's 7 heads take the merged form, the MLP-Transformer's one head
    the per-head form."""
    if mlp:
        group = [
            Setting("t", "association", "mlp", 6, S, 4, 4, 1, 1, 7, 1.0, variant),
            Setting("t", "association", "mlp", 6, S, 5, 3, 1, 1, 9, 1.0, variant),
        ]
    else:
        group = [
            Setting("t", "association", "aot", 6, S, 5, 5, 7, 1, 0, 1.0, variant),
            Setting("t", "association", "aot", 6, S, 6, 3, 1, 1, 0, 1.0, variant),
        ]
    model = ReplicaTransformer(group, [0, 1])
    _nonzero_biases(model)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(6, (2, 9, S), generator=gen)
    targets = torch.randint(6, (2, 9), generator=gen)
    weights = torch.rand(2, 9, generator=gen)

    def loss_and_grads(loss_of):
        model.zero_grad(set_to_none=True)
        per_replica, logits = loss_of()
        per_replica.sum().backward()
        grads = {
            n: torch.zeros_like(p) if p.grad is None else p.grad
            for n, p in model.named_parameters()
        }
        return per_replica.detach(), logits.detach(), grads

    def plain():
        logits = model(tokens)
        return (example_losses(logits, targets, "classification") * weights).sum(1), logits

    fast = _fast()
    fused = loss_and_grads(lambda: fast.loss(model, (tokens,), targets, weights, "classification"))
    reference = loss_and_grads(plain)
    torch.testing.assert_close(fused[0], reference[0])
    torch.testing.assert_close(fused[1], reference[1])
    for name, grad in reference[2].items():
        torch.testing.assert_close(fused[2][name], grad, msg=name)
        if hasattr(model, f"{name}_mask"):  # padded entries get exactly zero gradient
            assert (fused[2][name][getattr(model, f"{name}_mask") == 0] == 0).all(), name
    # the fast step as the loop calls it (S >= 2: without autograd) sets the same gradients
    model.zero_grad(set_to_none=True)
    stepped = fast(model, (tokens,), targets, weights, "classification")
    if S >= 2:
        model.zero_grad(set_to_none=True)
        direct = direct_step(model, tokens, targets, weights)
        torch.testing.assert_close(direct[0], stepped[0])
    torch.testing.assert_close(stepped[0], fused[0])
    torch.testing.assert_close(stepped[1], fused[1])
    for name, p in model.named_parameters():
        grad = torch.zeros_like(p) if p.grad is None else p.grad
        assert grad.shape == p.shape, name
        torch.testing.assert_close(grad, fused[2][name], msg=name)


def _nonzero_biases(model: ReplicaTransformer) -> None:
    """Random attention biases (padded entries stay zero), so their paths are exercised."""
    with torch.no_grad():
        for name in ("b_q", "b_k", "b_v", "b_o"):
            if name in model.names:
                bias = getattr(model, name)
                bias.normal_(generator=torch.Generator().manual_seed(1))
                bias.mul_(getattr(model, f"{name}_mask"))
