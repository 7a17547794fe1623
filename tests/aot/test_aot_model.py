"""The replica-batched AoT / MLP-Transformer (merged heads) against the textbook forward, its
step, its tasks and its training (tiny sizes)."""

import math
import random

import numpy as np
import pytest
import torch
from aot_oracle import textbook_logits
from torch import nn
from train_configs import train_config

from memcap.aot.model import AoTStep, ReplicaTransformer
from memcap.aot.settings import Setting, mlp_width, parameter_count
from memcap.aot.tasks import (
    all_sequences,
    association_task,
    distribution_task,
    sequence_index,
)
from memcap.training.data import ReplicaData, example_losses
from memcap.training.loop import evaluate, train_replicas
from memcap.training.step import ComputeCopy, select_model

CPU = torch.device("cpu")
CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)


def _setting(model="aot", N=5, S=2, d=4, d_h=3, H=2, depth=1, width=0, task="association"):
    return Setting("t", task, model, N, S, d, d_h, H, depth, width)


def _random_group(seed: int, variant: str, S: int, depth: int) -> list[Setting]:
    """One to three replicas of random shapes (AoT or MLP-Transformer) sharing N, S, depth."""
    pick = random.Random(seed)
    N = pick.randint(3, 6)
    group = []
    for _ in range(pick.randint(1, 3)):
        d = pick.randint(2, 6)
        mlp = pick.random() < 0.3
        group.append(
            Setting(
                "t", "association", "mlp" if mlp else "aot", N, S, d, pick.randint(1, d),
                1 if mlp else pick.randint(1, 4), depth, pick.randint(1, 8) if mlp else 0,
                1.0, variant,
            )
        )  # fmt: skip
    return group


def _nonzero_biases(model: ReplicaTransformer, seed: int = 1) -> None:
    """Random attention biases (padded entries stay zero), so their paths are exercised."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ("b_q", "b_k", "b_v", "b_o"):
            if name in model.names:
                bias = getattr(model, name)
                bias.copy_(torch.randn(bias.shape, generator=gen, dtype=bias.dtype))
                if hasattr(model, f"{name}_mask"):
                    bias.mul_(getattr(model, f"{name}_mask"))


def _gradients(model: nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {
        n: torch.zeros_like(p) if p.grad is None else p.grad.clone()
        for n, p in model.named_parameters()
    }


@pytest.mark.parametrize("variant", ["paper", "code"])
@pytest.mark.parametrize("S", [1, 2, 3])
@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_model_is_the_textbook_forward_in_float64(variant, S, depth, seed):
    """Outputs, weighted losses (both tasks) and every gradient equal the per-head forward's
    to 1e-10 in float64, over random shapes, padded or not; padded entries get exactly zero
    gradient."""
    settings = _random_group(seed, variant, S, depth)
    model = ReplicaTransformer(settings, list(range(len(settings)))).double()
    _nonzero_biases(model, seed)
    R, N = len(settings), settings[0].N
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(N, (R, 7, S), generator=gen)
    targets = torch.randint(N, (R, 7), generator=gen)
    probs = torch.softmax(torch.randn(R, 7, N, generator=gen, dtype=torch.float64), -1)
    weights = torch.rand(R, 7, generator=gen, dtype=torch.float64)
    step = AoTStep(train_config(), CPU)
    tight = {"rtol": 1e-10, "atol": 1e-10}
    expected = textbook_logits(model, tokens)[:, :, -1]
    torch.testing.assert_close(model(tokens), expected, **tight)
    for objective, wanted in (("classification", targets), ("distribution", probs)):
        loss, outputs = step.loss(model, (tokens,), wanted, weights, objective)
        reference = (example_losses(expected, wanted, objective) * weights).sum(1)
        torch.testing.assert_close(loss, reference, **tight)
        torch.testing.assert_close(outputs, expected, **tight)
        ours = _gradients(model, loss.sum())
        expected = textbook_logits(model, tokens)[:, :, -1]
        oracle = _gradients(model, (example_losses(expected, wanted, objective) * weights).sum())
        for name, grad in oracle.items():
            torch.testing.assert_close(ours[name], grad, **tight, msg=name)
            if model.padded:  # padded entries: exactly zero
                assert (ours[name][getattr(model, f"{name}_mask") == 0] == 0).all(), name


@pytest.mark.parametrize("seed", [3, 4])
def test_replicas_left_after_compaction_are_the_textbook_forward_in_float64(seed):
    """Replicas leaving (parameters and buffers compacted along the replica axis, as the loop
    does): the rest's outputs, losses and gradients still equal the textbook forward's to
    1e-10 in float64, and the full model's rows of them."""
    pick = random.Random(seed)
    N = pick.randint(3, 6)
    settings = [
        _setting(N=N, d=d, d_h=pick.randint(1, d), H=pick.randint(1, 4), depth=2)
        for d in (pick.randint(2, 6) for _ in range(3))
    ] + [_setting("mlp", N=N, d=4, d_h=3, H=1, depth=2, width=5)]
    model = ReplicaTransformer(settings, list(range(len(settings)))).double()
    _nonzero_biases(model, seed)
    R = len(settings)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(N, (R, 9, 2), generator=gen)
    targets = torch.randint(N, (R, 9), generator=gen)
    weights = torch.rand(R, 9, generator=gen, dtype=torch.float64)
    step = AoTStep(train_config(), CPU)
    full_loss, full_out = step.loss(model, (tokens,), targets, weights, "classification")
    full_grads = _gradients(model, full_loss.sum())
    kept = torch.tensor(sorted(pick.sample(range(R), R - 1)))
    select_model(model, kept)  # the parameters: the model has no select_buffers
    for name, buffer in list(model.named_buffers()):
        setattr(model, name, buffer.index_select(0, kept))
    tokens, targets, weights = tokens[kept], targets[kept], weights[kept]
    tight = {"rtol": 1e-10, "atol": 1e-10}
    loss, outputs = step.loss(model, (tokens,), targets, weights, "classification")
    expected = textbook_logits(model, tokens)[:, :, -1]
    torch.testing.assert_close(outputs, expected, **tight)
    torch.testing.assert_close(outputs, full_out[kept], **tight)
    torch.testing.assert_close(loss, full_loss[kept], **tight)
    ours = _gradients(model, loss.sum())
    reference = (example_losses(expected, targets, "classification") * weights).sum()
    oracle = _gradients(model, reference)
    for name, grad in oracle.items():
        torch.testing.assert_close(ours[name], grad, **tight, msg=name)
        torch.testing.assert_close(ours[name], full_grads[name][kept], **tight, msg=name)


def test_the_oracle_is_causal():
    """The textbook forward's mask: later tokens do not change earlier positions' logits."""
    model = ReplicaTransformer([_setting(S=4, depth=2)], [3])
    tokens = torch.tensor([[[0, 1, 2, 3]]])
    changed = tokens.clone()
    changed[..., 3] = 4
    before, after = textbook_logits(model, tokens), textbook_logits(model, changed)
    torch.testing.assert_close(before[:, :, :3], after[:, :, :3])
    assert (before[:, :, 3] - after[:, :, 3]).abs().max() > 1e-4


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_bf16_step_runs_the_same_module(device):
    """The training step of a bfloat16 copy (precision bf16): its loss and gradients are the
    float64 textbook model's within bfloat16 rounding, and a few Adam steps lower the loss."""
    settings = [_setting(N=6, d=6, d_h=6, H=4), _setting("mlp", N=6, d=4, d_h=4, H=1, width=6)]
    model = ReplicaTransformer(settings, [0, 1]).to(device)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(6, (2, 16, 2), generator=gen).to(device)
    targets = torch.randint(6, (2, 16), generator=gen).to(device)
    weights = torch.full((2, 16), 1 / 16, device=device)
    copy = ComputeCopy(model)
    copy.pull()
    step = AoTStep(train_config(precision="bf16"), torch.device(device))
    loss, _ = step(copy.model, (tokens,), targets, weights, "classification")
    copy.push_gradients()
    exact = model.double()
    expected = textbook_logits(exact, tokens)[:, :, -1]
    reference = (example_losses(expected, targets, "classification") * weights).sum(1)
    oracle = _gradients(exact, reference.sum())
    torch.testing.assert_close(loss.double(), reference, rtol=0.02, atol=0.02)
    for name, p in exact.named_parameters():
        error = (p.grad - oracle[name]).norm() / oracle[name].norm().clamp_min(1e-12)
        assert error < 0.05, (name, float(error))
    task = association_task(6, 2, 0, device)
    sizes = torch.full((2,), 36, device=device)
    data = ReplicaData((task.inputs.expand(2, -1, -1),), task.targets.expand(2, -1), sizes)
    cfg = train_config(steps=30, lr=0.05, eval_every=10, early_stop=False, precision="bf16")
    model = ReplicaTransformer(settings, [0, 1]).to(device)
    step = AoTStep(cfg, torch.device(device))
    result = train_replicas(model, data, "classification", cfg, [0, 1], step=step)
    assert (result.loss_curve[-1] < result.loss_curve[0]).all()


def test_padded_replicas_equal_unpadded_models():
    settings = [_setting(d=6, d_h=6, H=4), _setting(d=4, d_h=2, H=1), _setting(d=5, d_h=3, H=2)]
    padded = ReplicaTransformer(settings, [10, 11, 12])
    tokens = all_sequences(5, 2).expand(3, -1, -1)
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
    model = ReplicaTransformer([setting], [0])
    result = train_replicas(model, data, "classification", cfg, [0], step=AoTStep(cfg, CPU))
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
    step = AoTStep(cfg, CPU)
    batched = train_replicas(
        ReplicaTransformer(settings, seeds), data([0, 1]), "classification", cfg, seeds, step=step
    )
    for r, (s, seed) in enumerate(zip(settings, seeds, strict=True)):
        single = train_replicas(
            ReplicaTransformer([s], [seed]), data([r]), "classification", cfg, [seed], step=step
        )
        np.testing.assert_allclose(batched.loss_curve[:, r], single.loss_curve[:, 0], rtol=1e-4)
        assert batched.memorized[r] == single.memorized[0]


def _authors(model="aot", N=7, S=2, d=4, d_h=3, H=2, width=0):
    return Setting("t", "association", model, N, S, d, d_h, H, 1, width, 1.0, "code")


def test_authors_variant_is_their_stack_of_one_head_multihead_attentions():
    """Heads of nn.MultiheadAttention(d_h, 1) on a residual stream, then a biased unembedding."""
    model = ReplicaTransformer([_authors(N=6, d=4, d_h=4, H=2)], [0])
    _nonzero_biases(model)
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
