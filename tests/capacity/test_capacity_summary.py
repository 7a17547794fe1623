"""The merged capacity tables, the spread over shared contexts × draws, and the figure."""

import numpy as np
import pandas as pd

from memcap.capacity.figures import plot_real_capacity
from memcap.capacity.real import real_capacity_rows
from memcap.capacity.summary import LEADING_COLUMNS, first_runs, merge, shared_spread

CONTRACT = ["model", "layer", "H", "T", "certified", "last_kept", "first_dropped", "contexts"]


def _layer(name: str, layer: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    queries, contexts = rng.standard_normal((40, 8)), rng.standard_normal((40, 3, 8))
    rows = real_capacity_rows(queries, contexts, 4, None, None, seed=seed, draws=2,
                              shared_contexts=3, spread_H=[1, 3])  # fmt: skip
    return pd.DataFrame(rows).assign(model=name, layer=layer)


def _tables():
    table = merge([_layer("a", "0", 1), _layer("b", "random_attention", 2)])
    spread = shared_spread(table)
    return table, spread, first_runs(table, spread)


def test_merge_puts_the_identifying_columns_first():
    table, _, _ = _tables()
    assert list(table.columns[: len(LEADING_COLUMNS)]) == LEADING_COLUMNS
    # per layer: 4 own rows, 4 for the first run, 2 for each of the other 5 runs
    assert len(table) == 2 * (4 + 4 + 5 * 2)


def test_the_spread_is_taken_over_every_context_and_draw_at_the_spread_heads():
    table, spread, _ = _tables()
    assert spread[["model", "H"]].values.tolist() == [["a", 1], ["a", 3], ["b", 1], ["b", 3]]
    assert (spread["spread_runs"] == 6).all() and (spread["draws"] == 2).all()
    assert (spread["contexts"] == 3).all()
    for row in spread.itertuples():
        runs = table[(table["model"] == row.model) & (table["contexts"] == "shared")
                     & (table["H"] == row.H)]  # fmt: skip
        assert row.spread_median == runs["certified"].median()
        assert (row.spread_min, row.spread_max) == (
            runs["certified"].min(),
            runs["certified"].max(),
        )
        assert row.spread_resolved == runs["resolved"].sum()
        assert row.spread_max <= min(row.T, row.H * (row.n - 1) + 1)


def test_real_keeps_own_rows_and_the_first_run_with_its_spread_beside():
    _, spread, real = _tables()
    assert set(CONTRACT) <= set(real.columns)
    assert len(real) == 2 * 8 and (real.groupby(["model", "contexts"]).size() == 4).all()
    shared = real[real["contexts"] == "shared"]
    assert (shared["shared_context"] == 0).all() and (shared["draw"] == 0).all()
    assert shared["spread_runs"].isna().tolist() == [False, True, False, True] * 2
    assert real[real["contexts"] == "own"]["spread_runs"].isna().all()
    assert (real["bound"] <= real["T"]).all()


def test_the_figure_keeps_its_legend_and_labels_off_the_data_and_ticks():
    _, spread, real = _tables()
    fig = plot_real_capacity(real, spread)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert not legend.overlaps(ax.get_window_extent(renderer))
        label = ax.yaxis.label.get_window_extent(renderer)
        for tick in ax.get_yticklabels():
            if tick.get_text():
                assert not label.overlaps(tick.get_window_extent(renderer))
    # median and range: one band per model × layer on the shared panel
    assert len(fig.axes[0].collections) == 2


def test_one_run_per_layer_draws_the_first_runs_without_a_band():
    rng = np.random.default_rng(3)
    rows = real_capacity_rows(rng.standard_normal((30, 6)), rng.standard_normal((30, 3, 6)), 3,
                              None, None, seed=0)  # fmt: skip
    table = merge([pd.DataFrame(rows).assign(model="a", layer="1")])
    spread = shared_spread(table)
    assert spread.empty
    fig = plot_real_capacity(first_runs(table, spread), spread)
    assert "one run" in fig.axes[0].get_title()
    assert [tuple(line.get_ydata()) for line in fig.axes[0].lines[:1]] == [(3.0, 5.0, 7.0)]
