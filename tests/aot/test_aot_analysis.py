"""Paper B's bounds, the scaling-law fits, a tiny sweep end to end, summary and figure."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from memcap.aot import bounds
from memcap.aot.figures import plot_sweep
from memcap.aot.laws import form_test
from memcap.aot.settings import StageSettings, expand_sweep, group_replicas, width_buckets, x_axis
from memcap.aot.summary import SUMMARY_COLUMNS, fit_table, summarize
from memcap.aot.sweep import run_sweep
from memcap.cluster.costs import aot_models


def test_lower_bound_formulas():
    # N = 50, T0 = 2500, H = 1, d = d_h = 10: (H d_h + d) = 20 and H(d - 1) + 1 = 10
    assert bounds.chance(50) == pytest.approx(0.02)
    assert bounds.our_lower_bound(50, 2500, 1, 10, 10) == pytest.approx(0.02 + 0.98 * 20 / 2500)
    assert bounds.previous_lower_bound(50, 2500, 1, 10) == pytest.approx(0.02 + 0.98 * 10 / 2500)
    # d_h < d: ours uses H d_h + d, the previous bound H(d_h - 1) + 1 as paper B draws it
    # (the authors' plotting code: paper A's theorem at the head dimension, not at d)
    assert bounds.our_lower_bound(50, 2500, 20, 3, 10) == pytest.approx(0.02 + 0.98 * 70 / 2500)
    assert bounds.previous_lower_bound(50, 2500, 20, 10) == pytest.approx(0.02 + 0.98 * 181 / 2500)
    assert bounds.previous_lower_bound(50, 2500, 20, 1) == pytest.approx(0.02 + 0.98 * 1 / 2500)
    assert bounds.previous_lower_bound(50, 2500, 20, 2) == pytest.approx(0.02 + 0.98 * 21 / 2500)
    # ours exceeds the previous bound at every d_h <= d (H d_h + d > H(d_h - 1) + 1)
    d_h = np.arange(1, 11)
    assert (
        bounds.our_lower_bound(50, 2500, 20, d_h, 10)
        > bounds.previous_lower_bound(50, 2500, 20, d_h)
    ).all()
    # clipped at 1 once the bound exceeds T0 memorized examples; vectorised over H
    assert bounds.our_lower_bound(10, 100, 60, 2, 2) == 1.0
    np.testing.assert_allclose(
        bounds.our_lower_bound(10, 100, np.array([1, 49]), 2, 2), [0.1 + 0.9 * 0.04, 1.0]
    )


def test_fits_recover_known_laws():
    x = np.arange(1.0, 8.0)
    line = bounds.fit(x, 0.1 + 0.03 * x, "linear")
    assert line.slope == pytest.approx(0.03) and line.r2 == pytest.approx(1.0)
    quad = bounds.fit(x, 0.2 + 0.01 * x + 0.004 * x**2, "quadratic")
    assert quad.slope == pytest.approx(0.004) and quad.r2 == pytest.approx(1.0)
    hinge_y = np.where(x < 4, 0.1 * x, 0.4 + 0.01 * (x - 4))
    hinge = bounds.fit(x, hinge_y, "hinge", knot=4.0)
    np.testing.assert_allclose(hinge.coefficients, [0.0, 0.1, -0.09], atol=1e-10)
    np.testing.assert_allclose(hinge.predict(x), hinge_y, atol=1e-10)
    noisy = bounds.fit(x, 0.1 * x + np.array([0.1, -0.1] * 3 + [0.1]), "linear")
    assert 0 < noisy.r2 < 1


def test_fits_table_and_law_test_share_their_points_and_slope():
    # The default heads curve's shape with 3 seeds of unequal noise: H = 31 at the ceiling.
    rng = np.random.default_rng(0)
    means = {1: 0.135, 11: 0.523, 21: 0.898, 31: 0.992}
    rows = pd.DataFrame(
        [
            {"sweep": "heads", "model": "aot", "facet": "", "x_axis": "H", "H": h, "d_h": 10,
             "seed": seed, "accuracy": mean + rng.normal(0, 0.01 * (1 + seed)), "chance": 0.02,
             "bound_ours": 0.03, "bound_previous": 0.03}
            for h, mean in means.items()
            for seed in range(3)
        ]
    )  # fmt: skip
    fit = fit_table(rows).iloc[0]
    law = form_test(rows)
    assert (fit["n_points"], fit["censored"], fit["n_all"]) == (3, "31", 4)
    assert fit["slope"] == pytest.approx(law.extra["slope"])
    assert [float(c) for c in fit["coefficients"].split(";")] == pytest.approx(
        law.coefficients, rel=1e-5
    )
    assert "censored, left out: H = 31" in law.detail
    # every point, the ceiling's included: the line bends
    assert fit["r2_all"] < fit["r2"]


def _spec(**overrides):
    spec = {
        "task": "association",
        "models": ["aot"],
        "N": 4,
        "S": 2,
        "d": 4,
        "d_h": "d",
        "H": [1, 2, 3],
        "depth": 1,
        "cap_d_h": False,
        "temperature": 1.0,
        "recipe": "ours",
        "variant": "paper",
        "train": {"epochs": None, "lr": None, "batch_size": None, "sample": None},
    }
    return {**spec, **overrides}


def test_expand_sweep_and_groups():
    settings = expand_sweep("cmp", _spec(models=["aot", "mlp"], d=[3, 4], H=[1, 3]))
    assert len(settings) == 8
    mlp = [s for s in settings if s.model == "mlp"]
    assert {(s.d, s.H, s.width) for s in mlp} == {(3, 1, 0), (3, 1, 12), (4, 1, 0), (4, 1, 16)}
    capped = expand_sweep("d", _spec(d=[3, 5], d_h=4, cap_d_h=True, H=2))
    assert [(s.d, s.d_h) for s in capped] == [(3, 3), (5, 4)]
    replicas = [(s, seed) for s in settings for seed in (0, 1)]
    padded = group_replicas(replicas, pad=True)
    # one AoT group (4 settings x 2 seeds); MLP replicas grouped by width (0, 12, 16)
    assert sorted(len(g) for g in padded) == [2, 2, 4, 8]
    assert len(group_replicas(replicas, pad=False)) == 8
    # mini-batch training (the authors' recipe): widths 12 and 16 share a padded model
    # (padding adds 4 / 28 to their MLPs), width 0 does not (it would pad 0 to 12)
    shared = group_replicas(replicas, pad=True, split_widths=False)
    assert sorted(len(g) for g in shared) == [4, 4, 8]
    assert width_buckets([0, 0, 70, 100, 140, 200]) == {0: 0, 70: 70, 100: 70, 140: 140, 200: 140}
    assert x_axis(_spec()) == "H" and x_axis(_spec(models=["aot", "mlp"])) == "params"
    assert x_axis(_spec(H=2, d_h=[1, 2])) == "d_h"


@pytest.fixture(scope="module")
def tiny_summary():
    train = {"lr": 0.05, "schedule": "linear", "warmup_frac": 0.0, "epochs": 30}
    train |= {"batch_size": None, "eval_every": 10, "early_stop": True}
    authors = {"sample": 64, "batch_size": 16, "epochs": 4, "lr": 0.01, "final_lr": 5e-4}
    authors |= {"mlp_final_lr": 1e-4, "last_batches": 8}
    stage = StageSettings(
        seeds=2, base_seed=0, train=train, authors=authors, pad_replicas=True,
        precision="float32", compile=False, cuda_graph=False,
    )  # fmt: skip
    frames = []
    for name, spec in {
        "heads": _spec(),
        "dist": _spec(task="distribution", N=3, H=[1, 2]),
        "theirs": _spec(recipe="authors", variant="code", d_h=[1, 2, 4], H=2),
    }.items():
        result = run_sweep(name, spec, stage, torch.device("cpu"))
        assert sum(group["replicas"] for group in result.groups) == len(result.table)
        models = aot_models(name, spec, stage)  # the cost model groups as the training does
        assert [replicas for _, replicas, _ in models] == [g["replicas"] for g in result.groups]
        assert result.train == {"recipe": spec["recipe"], **stage.sweep_train(spec)}
        frames.append(result.table)
    return summarize(frames)


def test_tiny_sweep_rows_and_columns(tiny_summary):
    assert list(tiny_summary.columns) == SUMMARY_COLUMNS
    heads = tiny_summary[tiny_summary["sweep"] == "heads"]
    assert len(heads) == 6 and sorted(heads["seed"].unique()) == [0, 1]
    assert (heads["accuracy"] > heads["chance"]).all()
    assert heads["kl"].isna().all()
    dist = tiny_summary[tiny_summary["sweep"] == "dist"]
    assert (dist["kl"] > 0).all() and (dist["entropy"] > 0).all()
    np.testing.assert_allclose(dist["cross_entropy"], dist["kl"] + dist["entropy"])
    assert (tiny_summary["params"] > 0).all()
    theirs = tiny_summary[tiny_summary["sweep"] == "theirs"]
    assert (theirs["metric"] == "last_batches").all() and (theirs["variant"] == "code").all()
    assert theirs["accuracy_batches"].between(0, 1).all()
    assert (theirs["accuracy"] == theirs["accuracy_batches"]).all()
    assert (theirs["steps_run"] == 4 * 64 // 16).all()
    ours = tiny_summary[tiny_summary["sweep"] != "theirs"]
    assert (ours["accuracy"] == ours["accuracy_table"]).all() and ours[
        "accuracy_batches"
    ].isna().all()


def test_tiny_sweep_rows_carry_both_bounds_at_their_head_dimension(tiny_summary):
    theirs = tiny_summary[tiny_summary["sweep"] == "theirs"]  # d = 4, d_h = 1, 2, 4, H = 2
    expected = bounds.previous_lower_bound(theirs["N"], theirs["T0"], theirs["H"], theirs["d_h"])
    np.testing.assert_allclose(theirs["bound_previous"], expected)
    assert theirs.set_index("d_h")["bound_previous"].is_monotonic_increasing


def test_fit_table_and_figures(tiny_summary):
    fits = fit_table(tiny_summary)
    assert set(fits["sweep"]) == {"heads", "dist", "theirs"}
    assert (fits["n_all"] >= fits["n_points"]).all()
    assert set(fits["form"]) == {"linear", "quadratic"}
    assert fits["r2"].between(0, 1).all() or fits["r2"].isna().any()
    for name, rows in tiny_summary.groupby("sweep"):
        fig = plot_sweep(rows)
        assert len(fig.axes) == (2 if name == "dist" else 1)
        labels = [line.get_label() for line in fig.axes[0].lines]
        assert {"chance 1/N", "our lower bound", "previous lower bound"} <= set(labels)
        # the law's fit with its band where the curve has a form law, else the drawn fit
        assert any(label.startswith("fit:") or "fit (seeds below" in label for label in labels)
        if name == "heads":
            assert "linear in H: " in fig.axes[0].get_title()
        recipe = "authors' recipe" if name == "theirs" else "our recipe"
        assert recipe in fig.axes[0].get_title()
        plt.close(fig)


def test_summarize_rejects_tables_without_the_contract_columns():
    with pytest.raises(ValueError, match="lack columns"):
        summarize([pd.DataFrame({"sweep": ["x"]})])
