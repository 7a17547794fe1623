"""Paper A's sweeps on the engine's options: buckets, fitted replicas leaving, bfloat16."""

import copy
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.synthetic.buckets import StepCost, StepShape, bucket_replicas, plan_cost
from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.settings import (
    StageSettings,
    replica_groups,
    step_cost,
    step_shape,
    sweep_spec,
)
from memcap.synthetic.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
PAPER_COST = StepCost(d=64, d_v=1, outputs=100, eval_every=500)


@pytest.fixture(autouse=True)
def _one_thread():
    """One thread: two threads on a loaded 2-core host run these tiny sweeps 20x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _config(name: str) -> dict:
    config = yaml.safe_load((ROOT / name).read_text())
    validate_schema(config, SCHEMA)
    return config


def _shapes(heads: list[int], batch: int = 256, examples: int = 10000) -> list[StepShape]:
    return [StepShape(h, 32, 64, batch, examples) for h in heads]


def test_padding_is_zero_for_one_shape_and_padded_heads_cost_more_than_head_dims():
    assert PAPER_COST.padding(_shapes([30, 30, 30])) == 0.0
    heads = PAPER_COST.padding(
        [StepShape(10, 32, 64, 256, 10000), StepShape(20, 32, 64, 256, 10000)]
    )
    dims = PAPER_COST.padding(
        [StepShape(20, 32, 10, 256, 10000), StepShape(20, 32, 64, 256, 10000)]
    )
    assert heads == pytest.approx(1 / 3, rel=0.05)  # 2 x 20 heads paid for 30
    assert 0 < dims < 0.05  # folded weights: d_h enters only the per-step weight products
    # full batches pay for the largest T, mini-batches only in the evaluations
    full = PAPER_COST.padding([StepShape(20, 32, 64, t, t) for t in (1000, 2000)])
    mini = PAPER_COST.padding([StepShape(20, 32, 64, 256, t) for t in (1000, 2000)])
    assert full == pytest.approx(1 / 3, rel=0.1) and 0 < mini < 0.01


def _fewest_models(shapes: list[StepShape], bound: float) -> int:
    """Brute force: the fewest batched models of padding <= bound (every set partition)."""

    def partitions(items):
        if not items:
            yield []
            return
        first, rest = items[0], items[1:]
        for part in partitions(rest):
            for k in range(len(part)):
                yield [*part[:k], [first, *part[k]], *part[k + 1 :]]
            yield [[first], *part]

    return min(
        len(p)
        for p in partitions(list(range(len(shapes))))
        if all(PAPER_COST.padding([shapes[i] for i in m]) <= bound + 1e-12 for m in p)
    )


@pytest.mark.parametrize("bound", [0.0, 0.1, 0.2, 0.5])
def test_buckets_keep_the_bound_with_the_fewest_models(bound):
    shapes = _shapes([1, 5, 10, 15, 20, 25, 30])
    models = bucket_replicas(shapes, PAPER_COST, bound)
    assert sorted(itertools.chain(*models)) == list(range(len(shapes)))
    assert all(PAPER_COST.padding([shapes[i] for i in m]) <= bound + 1e-12 for m in models)
    assert len(models) == _fewest_models(shapes, bound)


def test_the_paper_heads_sweep_needs_a_few_models_not_one_per_head_count():
    heads = [1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60]
    shapes = _shapes(heads * 6)  # two contexts x three seeds
    models = bucket_replicas(shapes, PAPER_COST, 0.2)
    one = plan_cost(shapes, [list(range(len(shapes)))], PAPER_COST, model_overhead=1e9)
    split = plan_cost(shapes, models, PAPER_COST, model_overhead=1e9)
    assert split["padding"] <= 0.2 < one["padding"]
    assert len(models) < len(set(heads))
    assert split["cost"] == pytest.approx(split["padded_flops"] + len(models) * 1e9)


def test_paper_grid_buckets_merge_t_of_one_step_count_and_keep_the_bound():
    config = _config("configs/paper.yaml")
    section, engine = copy.deepcopy(config["synthetic"]), copy.deepcopy(config["engine"])
    engine["synthetic"].update(group_by=[], max_padding=0.2)
    stage = StageSettings.from_config(section, 0, engine)
    for name in ("heads", "context_size", "head_dim"):
        spec = sweep_spec(section, name)
        groups = replica_groups(spec, stage)
        assert sum(len(m) for m in groups.values()) == len(spec.settings()) * 3 * len(spec.T)
        merged_t = False
        for members in groups.values():
            configs = {stage.train_config(spec, r.T) for r in members}
            assert len(configs) == 1  # one step count and schedule per batched model
            cfg = configs.pop()
            cost = step_cost(stage, "classification", cfg.eval_every)
            assert cost.padding([step_shape(r, cfg.batch_size) for r in members]) <= 0.2 + 1e-12
            merged_t |= len({r.T for r in members}) > 1
        assert merged_t  # mini-batches: T does not shape the step


_STAGE_ENGINE = ("group_by", "max_padding", "leave_when_fit")  # engine.synthetic's keys
_ENGINE = ("precision", "compile")  # engine's own keys


def _tiny_section(**overrides) -> tuple[dict, dict]:
    """configs/test.yaml's synthetic and engine sections, shrunk, with ``overrides`` put
    where they belong (engine knobs into ``engine``, the rest into ``synthetic``)."""
    config = _config("configs/test.yaml")
    section, engine = copy.deepcopy(config["synthetic"]), copy.deepcopy(config["engine"])
    for key, value in overrides.items():
        target = (
            engine["synthetic"] if key in _STAGE_ENGINE else engine if key in _ENGINE else section
        )
        target[key] = value
    section["train"].update(steps=150, lr=0.01, eval_every=25, early_stop=False)
    section["sweeps"]["heads"].update(values=[1, 2, 3], T=[4, 24], tasks=["classification"])
    section["ladder"].update(grow_at=None, restarts=0)  # the listed grid, one training each
    return section, engine


def _rows(tiny: tuple[dict, dict]) -> pd.DataFrame:
    section, engine = tiny
    spec = sweep_spec(section, "heads")
    stage = StageSettings.from_config(section, 0, engine)
    table = run_sweep(spec, stage, torch.device("cpu")).table
    return table.sort_values(["H", "context", "T"]).reset_index(drop=True)


def test_buckets_train_the_same_replicas_as_one_model_per_shape():
    # A gentle lr keeps float rounding (batch shapes reduce in different orders) from being
    # amplified, as in test_synthetic's grouping test.
    grouped = _rows(_tiny_section(group_by=["shape", "T"]))
    bucketed = _rows(_tiny_section(group_by=[], max_padding=0.2))
    pd.testing.assert_series_equal(grouped["memorized"], bucketed["memorized"])
    pd.testing.assert_series_equal(grouped["certified"], bucketed["certified"])


def test_fitted_replicas_leaving_keeps_the_memorized_counts():
    stay = _rows(_tiny_section(group_by=["T"]))
    leave = _rows(_tiny_section(group_by=["T"], leave_when_fit=True))
    assert (stay["accuracy"] == 1.0).any() and (stay["accuracy"] < 1.0).any()
    pd.testing.assert_series_equal(stay["memorized"], leave["memorized"])
    pd.testing.assert_series_equal(stay["fit_step"], leave["fit_step"])


def test_a_compacted_model_is_the_model_of_its_kept_replicas():
    shapes = [MHAShape(d=6, n=n, H=h, d_h=3, classes=5) for h, n in ((1, 2), (3, 4), (2, 3))]
    model = ReplicaMHA(shapes, [0, 1, 2])
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.0 + torch.rand_like(p))  # trained weights, not the init; padding stays 0
    kept = torch.tensor([0, 2])
    compacted = copy.deepcopy(model)
    for name, p in list(compacted.named_parameters()):
        setattr(compacted, name, torch.nn.Parameter(p.detach().index_select(0, kept)))
    compacted.select_buffers(kept)
    query, context = torch.rand(2, 5, 6), torch.rand(2, 5, 4, 6)
    alone = [ReplicaMHA([shapes[r]], [0]) for r in kept.tolist()]
    for k, (r, single) in enumerate(zip(kept.tolist(), alone, strict=True)):
        n, h = shapes[r].n, shapes[r].H
        with torch.no_grad():
            for name, p in single.named_parameters():
                own = getattr(model, name)[r]
                p.copy_(own[tuple(slice(0, s) for s in p.shape[1:])])
        expected = single(query[k : k + 1], context[k : k + 1, :, :n])
        got = compacted(query, context)[k : k + 1]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
        assert compacted.shapes[k] == shapes[r] and h <= compacted.max_H


def test_bf16_capacity_estimates_agree_with_float32_within_seed_noise():
    """Criterion: per setting (H, context), the seed means of the capacity estimate (the
    largest memorized count over the T grid) under bf16 and float32 differ by at most two
    standard errors of their difference (seeds as samples) plus one example."""
    estimates = {}
    for precision in ("float32", "bf16"):
        tiny = _tiny_section(group_by=["T"], precision=precision, seeds=6)
        tiny[0]["train"].update(lr=0.05)
        tiny[0]["sweeps"]["heads"].update(values=[1, 3], T=[12, 24, 48])
        rows = _rows(tiny)
        estimates[precision] = rows.groupby(["H", "context", "seed"])["memorized"].max()
    both = pd.concat(estimates, axis=1).groupby(["H", "context"])
    mean, std, count = both.mean(), both.std(), both.count()
    difference = (mean["bf16"] - mean["float32"]).abs()
    noise = 2 * np.sqrt((std["bf16"] ** 2 + std["float32"] ** 2) / count["bf16"]) + 1
    assert (difference <= noise).all(), pd.DataFrame({"difference": difference, "noise": noise})


def test_an_unknown_precision_names_the_key_and_the_choices():
    config = _config("configs/test.yaml")
    config["engine"]["precision"] = "fp16"
    with pytest.raises(ConfigError) as err:
        validate_schema(config, SCHEMA)
    assert err.value.key == "engine.precision"
    assert "bf16" in str(err.value)
