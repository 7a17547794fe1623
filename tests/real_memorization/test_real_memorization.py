"""The real-embedding stage: its examples, its controls, known answers of fixed attention, the
paired comparison and its config checks."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.real_memorization import summary
from memcap.real_memorization.inputs import Examples, control, layer_draw
from memcap.real_memorization.settings import layer_stage
from memcap.real_memorization.train import train_layer
from memcap.synthetic.settings import StageSettings
from memcap.training.config import derive_seed
from memcap.validation import check_config

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
SECTION = {
    "layers": [], "n": 4, "H": [1, 2], "d_h": 4, "T": [8, 16], "max_T": 24,
    "contexts": ["shared"], "tasks": ["classification"], "inputs": ["real"], "seeds": 2,
}  # fmt: skip


def _synthetic(leave_when_fit: bool = True) -> StageSettings:
    section = {
        "d": 6, "classes": 5, "value_dim": 1, "saturation_threshold": 0.99,
        "train": {"steps": 40, "lr": 0.03, "warmup_frac": 0.1, "schedule": "cosine",
                  "batch_size": None, "eval_every": 20, "early_stop": True,
                  "extra_budgets": 0, "extra_lr_frac": 0.1, "regression_tol": 0.01},
        "authors": {},
        "ladder": {"grow_at": 0.9, "factor": 2, "max_T": 64, "warm_start": False,
                   "restarts": 0},
        "convergence": {"factor": 2, "gain": 0.05},
    }  # fmt: skip
    engine = {
        "precision": "float32", "compile": False, "cuda_graph": False,
        "synthetic": {"group_by": ["T"], "max_padding": None, "leave_when_fit": leave_when_fit},
    }  # fmt: skip
    return StageSettings.from_config(section, 0, engine)


def _examples(T: int = 24, n: int = 4, d: int = 10, seed: int = 0) -> Examples:
    g = torch.Generator().manual_seed(seed)
    return Examples(torch.randn(T, d, generator=g) * 2, torch.randn(T, n, d, generator=g) * 2)


def test_examples_load_the_first_n_tokens_of_an_extracted_layer(tmp_path):
    queries = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    contexts = np.arange(3 * 6 * 5, dtype=np.float32).reshape(3, 6, 5)
    (tmp_path / "1").mkdir()
    np.save(tmp_path / "1" / "queries.npy", queries)
    np.save(tmp_path / "1" / "contexts.npy", contexts)
    loaded = Examples.load(tmp_path, "1", 4)
    assert loaded.shape == (3, 4, 5)
    np.testing.assert_array_equal(loaded.contexts.numpy(), contexts[:, :4])
    np.testing.assert_array_equal(loaded.queries.numpy(), queries)
    with pytest.raises(ValueError, match="real_memorization.n = 7 exceeds the 6"):
        Examples.load(tmp_path, "1", 7)


def test_controls_have_the_shape_and_the_gaussian_has_the_real_moments():
    real = _examples(T=3000, n=2, d=3)
    real = Examples(real.queries + 5.0, real.contexts + 5.0)
    uniform = control(real, "uniform", 1)
    assert uniform.shape == real.shape and float(uniform.contexts.min()) >= 0
    assert float(uniform.contexts.max()) <= 1
    gauss = control(real, "gaussian", 1)
    tokens = torch.cat([gauss.queries, gauss.contexts.reshape(-1, 3)])
    want = torch.cat([real.queries, real.contexts.reshape(-1, 3)])
    # 9,000 tokens: the sample mean within ~4 SE (2/√9000 ≈ 0.02), the covariance within 10%
    torch.testing.assert_close(tokens.mean(0), want.mean(0), atol=0.1, rtol=0)
    torch.testing.assert_close(torch.cov(tokens.T), torch.cov(want.T), atol=0.4, rtol=0.1)


def test_every_input_of_a_seed_reads_the_same_examples_order_and_labels():
    real = _examples()
    draws = {kind: layer_draw(real, kind, 0, 5) for kind in ("real", "uniform", "gaussian")}
    sets = {kind: draw((1, 3, "random", "classification"), 16) for kind, draw in draws.items()}
    for kind in ("uniform", "gaussian"):
        torch.testing.assert_close(sets[kind].targets, sets["real"].targets, rtol=0, atol=0)
    shared = draws["real"]((1, 3, "shared", "classification"), 16)
    assert shared.contexts.shape == (16, 3, 10)
    assert torch.equal(shared.contexts[0], shared.contexts[-1])  # one context for every query
    g = torch.Generator().manual_seed(derive_seed(0, "real order", 1))
    order = torch.randperm(24, generator=g)
    torch.testing.assert_close(sets["real"].queries, real.queries[order[:16]], rtol=0, atol=0)


def test_repeated_context_rows_lower_fixed_attention_rank_to_h_m_minus_1_plus_1():
    """A shared context of n' = 4 rows with m = 2 distinct: random (fixed) attention's Z has
    rank H(m−1)+1, below Theorem 1's H(n'−1)+1, on every seed and H."""
    real = _examples(T=24)
    context = real.contexts.clone()
    context[:, 2:] = context[:, :2]  # rows 3 and 4 repeat rows 1 and 2: m = 2
    result = train_layer(Examples(real.queries, context), SECTION, _synthetic(), CPU)
    rows = result.capacity
    assert set(rows["context"]) == {"shared"} and len(rows) == 4
    for _, row in rows.iterrows():
        assert row["certified"] == row["H"] * (2 - 1) + 1
        assert row["bound"] == row["H"] * (4 - 1) + 1


def test_the_real_path_fed_uniform_arrays_reproduces_the_uniform_control(tmp_path):
    """Seed k's control arrays written as an extraction and trained as "real" give the rows
    the uniform control gives seed k (same labels, order, initialisation and batches)."""
    real = _examples(T=24)
    section = {**SECTION, "contexts": ["random", "shared"], "inputs": ["uniform"]}
    stage = _synthetic(leave_when_fit=False)
    controlled = train_layer(real, section, stage, CPU).capacity
    seed = int(controlled["seed"].iloc[0])
    arrays = control(real, "uniform", derive_seed(0, "real control", "uniform", seed))
    (tmp_path / "1").mkdir()
    np.save(tmp_path / "1" / "queries.npy", arrays.queries.numpy())
    np.save(tmp_path / "1" / "contexts.npy", arrays.contexts.numpy())
    loaded = Examples.load(tmp_path, "1", 4)
    again = train_layer(loaded, {**section, "inputs": ["real"]}, stage, CPU).capacity
    keys = ["context", "H", "seed"]
    columns = ["capacity", "fitted_T", "fitted_T_high", "certified", "T_max"]
    want = controlled[controlled["seed"] == seed].set_index(keys)[columns].sort_index()
    got = again[again["seed"] == seed].set_index(keys)[columns].sort_index()
    pd.testing.assert_frame_equal(got, want)


def _capacity(real_values, control_values, lower=None) -> pd.DataFrame:
    rows = []
    for kind, values in (("real", real_values), ("uniform", control_values)):
        for seed, value in enumerate(values):
            rows.append({
                "model": "m", "layer": "1", "input": kind, "context": "random",
                "task": "classification", "H": 2, "seed": seed, "capacity": value,
                "bracketed": not (lower and kind == "real" and seed in lower),
                "censored": False,
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_paired_comparison_finds_a_clear_gap_and_not_a_null_one():
    above = summary.paired(_capacity([120, 131, 118, 125, 140], [100, 108, 99, 104, 115]))
    assert above["outcome"].iloc[0] == "real above" and above["p_value"].iloc[0] < 0.01
    assert 0.19 < above["change"].iloc[0] < 0.22
    same = summary.paired(_capacity([100, 111, 95, 104, 120], [104, 106, 99, 100, 118]))
    assert same["outcome"].iloc[0] == "no difference shown"


def test_paired_comparison_takes_a_lower_bound_as_censored():
    """A real seed whose count is a lower bound enters as [change, ∞): it is not an exact
    seed, and with fewer than two exact seeds nothing is decided."""
    table = summary.paired(_capacity([120, 131, 118], [100, 108, 99], lower={0, 1}))
    assert table["exact"].iloc[0] == 1 and table["p_value"].iloc[0] == 1.0
    assert table["outcome"].iloc[0] == "no difference shown"


def test_config_names_a_layer_of_a_model_it_does_not_extract():
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    config["real_memorization"]["layers"] = [{"model": "bert-huge", "layer": 1}]
    with pytest.raises(ConfigError, match=r"real_memorization.layers\[0\].model"):
        check_config(config)
    config["real_memorization"]["layers"] = [{"model": "bert-tiny", "layer": 1}]
    config["real_memorization"]["T"] = [8, 64]
    with pytest.raises(ConfigError, match="real_memorization.T"):
        check_config(config)


def test_own_sizes_are_the_layers_and_a_missing_one_names_its_key():
    """``own`` reads n, d_h and an H value from the layer's extraction provenance; H stays
    sorted and distinct; a size the provenance lacks is an error naming the key."""
    from memcap.real_memorization.settings import resolve

    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["real_memorization"].update(n="own", d_h="own", H=[1, "own", 4])
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    sizes = {"n": 197, "heads": 12, "head_dim": 64}
    resolved = resolve(config["real_memorization"], sizes)
    assert (resolved["n"], resolved["d_h"], resolved["H"]) == (197, 64, [1, 4, 12])
    assert config["real_memorization"]["H"] == [1, "own", 4]  # the config is not changed
    assert resolve(SECTION, sizes) == SECTION
    with pytest.raises(ConfigError, match="real_memorization.H"):
        resolve(config["real_memorization"], {**sizes, "heads": None})
    config["real_memorization"]["d_h"] = "mine"
    with pytest.raises(Exception, match="mine"):
        validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")


def test_the_stage_bisects_to_its_own_bracket_not_the_synthetic_ladders():
    """``real_memorization.bracket`` replaces synthetic.ladder.bracket for the stage (null: no
    bisection even where the synthetic sweeps bisect); the other ladder keys are inherited,
    max_T capped by the section's and the examples there are."""
    synthetic = _synthetic()
    synthetic = replace(synthetic, ladder=replace(synthetic.ladder, bracket=1.1))
    off = layer_stage(synthetic, {**SECTION, "bracket": None}, d=10, examples=20)
    assert off.ladder.bracket is None and off.ladder.max_T == 20
    assert off.ladder.grow_at == synthetic.ladder.grow_at and off.d == 10 and off.embedded
    unset = replace(synthetic, ladder=replace(synthetic.ladder, bracket=None))
    on = layer_stage(unset, {**SECTION, "bracket": 1.2}, d=10, examples=100)
    assert on.ladder.bracket == 1.2 and on.ladder.max_T == SECTION["max_T"]
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["real_memorization"]["bracket"] = 1.5
    with pytest.raises(Exception, match="1.5"):
        validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_on_cuda_memorizes_as_float32_on_the_cpu():
    """configs/paper.yaml's arithmetic: the same module in bf16 on a GPU memorizes what it
    memorizes in float32 on the CPU, within 2 examples or a quarter (every seed and H)."""
    examples = _examples(T=24, n=4, d=6)
    cpu = train_layer(examples, SECTION, _synthetic(), CPU).capacity
    bf16 = replace(_synthetic(), precision="bf16")
    gpu = train_layer(examples, SECTION, bf16, torch.device("cuda")).capacity
    assert len(gpu) == len(cpu)
    want, got = cpu["capacity"].to_numpy(float), gpu["capacity"].to_numpy(float)
    assert (np.abs(got - want) <= np.maximum(2, 0.25 * want)).all(), (want, got)
