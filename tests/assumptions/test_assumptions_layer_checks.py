"""memcap.assumptions: settings, tables, summary rows (the contracted columns), figures."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from snakemake.utils import validate

from memcap.assumptions import checks, figures, summary
from memcap.assumptions.records import error_estimate, error_estimates
from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import Outcome, context_ranks, kruskal_band, kruskal_profile
from memcap.numerics.error import ErrorScale
from memcap.numerics.ratios import prefix_ratios
from memcap.plotting import save_figure

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = [
    "model",
    "layer",
    "T",
    "n",
    "d",
    "samples",
    "context_full_rank_frac",
    "kruskal_p_n",
    "general_position_p_d",
    "kruskal_rank_estimate",
]


def test_settings_from_the_schema_defaults():
    config = {}
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    settings = AssumptionsSettings.from_config(config["assumptions"])
    assert settings == AssumptionsSettings(seed=settings.seed)
    assert settings.rtol is None and settings.context_rtol is None
    for path in ("config.yaml", "configs/test.yaml", "configs/paper.yaml"):
        section = yaml.safe_load((ROOT / path).read_text()).get("assumptions", {})
        assert AssumptionsSettings.from_config(section).samples >= 1


def test_settings_band_and_raw_pass_every_setting():
    queries = np.random.default_rng(1).standard_normal((30, 12))
    settings = AssumptionsSettings(seed=3, near_duplicate_cosine=0.99, method="qr")
    options = {"near_duplicate_cosine": 0.99, "method": "qr", "device": "cpu", "workers": 1}
    band = settings.band(queries, 20, device="cpu", workers=1)
    direct = kruskal_band(queries, 20, seed=3, **options)
    for ours, theirs in zip(
        (band.profile, band.strict, band.loose),
        (direct.profile, direct.strict, direct.loose),
        strict=True,
    ):
        assert ours.estimate == theirs.estimate and ours.rtol == theirs.rtol
        np.testing.assert_array_equal(ours.m, theirs.m)
        assert ours.route == theirs.route == "qr"
        assert ours.scaling == "equilibrate"
    # the band's profile at τ is the equilibrated profile itself
    profile = kruskal_profile(queries, 20, seed=3, **options)
    np.testing.assert_array_equal(band.profile.m, profile.m)
    assert band.strict.rtol == pytest.approx(10 * profile.rtol)
    assert band.loose.rtol == pytest.approx(profile.rtol / 10)
    # paper A's rule: the stored values at the tolerance
    raw = settings.raw(queries, 20, device="cpu", workers=1)
    theirs = kruskal_profile(queries, 20, seed=3, scaling="none", **options)
    assert raw.scaling == "none" and raw.rtol == theirs.rtol
    np.testing.assert_array_equal(raw.m, theirs.m)
    # scaling = none decides on the stored values throughout
    stored = AssumptionsSettings(seed=3, method="qr", scaling="none").band(queries, 20, "cpu", 1)
    assert stored.profile.scaling == "none"
    np.testing.assert_array_equal(stored.profile.m, raw.m)


def test_settings_decide_on_the_ranks_of_their_scaling():
    contexts = np.random.default_rng(2).standard_normal((5, 4, 8)).astype(np.float32)
    ranks = context_ranks(contexts)
    assert AssumptionsSettings().deciding(ranks) is ranks
    assert AssumptionsSettings(scaling="none").deciding(ranks) is ranks.raw
    raw = context_ranks(contexts, scaling="none")
    assert AssumptionsSettings(scaling="none").deciding(raw) is raw
    with pytest.raises(ValueError, match="re-run the extraction"):
        AssumptionsSettings().deciding(raw)  # no equilibrated ranks to take


@pytest.fixture(scope="module")
def layer_results():
    rng = np.random.default_rng(0)
    queries = rng.standard_normal((40, 16)).astype(np.float32)
    queries[5] = queries[2]  # a duplicate: Kruskal rank 1
    contexts = rng.standard_normal((40, 6, 16)).astype(np.float32)
    contexts[0, 3] = contexts[0, 0]
    band = kruskal_band(queries, samples=50)
    raw = kruskal_profile(queries, samples=50, scaling="none")
    ranks = context_ranks(contexts, chunk=7)
    return band, raw, ranks


def test_profile_table(layer_results):
    profile = layer_results[0].profile
    table = checks.profile_table(profile)
    assert list(table.columns) == [
        "k", "p_full_rank", "independent", "samples", "p_low", "p_high", "dependent_bound",
    ]  # fmt: skip
    assert table["k"].tolist() == list(range(1, 17))
    assert (table["p_low"] <= table["p_full_rank"]).all()
    assert (table["p_full_rank"] <= table["p_high"]).all()
    assert table.loc[0, "p_full_rank"] == 1.0 and table.loc[0, "independent"] == 50


def test_records_and_summary_row_follow_the_contract(layer_results):
    band, raw, ranks = layer_results
    profile = band.profile
    kruskal = checks.kruskal_record(band, raw, n=6)
    context = checks.context_record(ranks)
    assert kruskal["p_n"] == profile.p[6] and kruskal["p_d"] == profile.p[16]
    assert kruskal["upper_bound"] == 1
    assert kruskal["scaling"] == "equilibrate"
    # the duplicate is dependent at any tolerance: neither k = n nor k = d applies
    assert kruskal["outcome_n"] == kruskal["outcome_d"] == Outcome.DOES_NOT_APPLY.value
    assert kruskal["band"]["p_n_loose"] == band.loose.p[6]
    assert kruskal["band"]["rtol_strict"] == pytest.approx(10 * profile.rtol)
    assert kruskal["paper_a"]["scaling"] == "none"
    assert kruskal["paper_a"]["p_n"] == raw.p[6] and kruskal["paper_a"]["estimate"] == 1
    assert context["contexts_checked"] == 40
    assert context["full_rank_frac"] == pytest.approx(39 / 40)
    assert context["worst_example"] == 0
    # decided through its Gram matrix, the repeated token's σ_min is ~0: no finite margin
    assert context["worst_margin"] is None or context["worst_margin"] < 0
    assert context["rank_histogram"] == {"5": 1, "6": 39}
    # the repeated token proves context 0 deficient; the others clear the band
    assert context["outcome"] == Outcome.DOES_NOT_APPLY.value
    assert context["outcome_counts"] == {"applies": 39, "does not apply": 1}
    assert context["proved_deficient"] == 1
    assert context["paper_a"]["full_rank_frac"] == pytest.approx(39 / 40)
    row = summary.summary_row("m", "random_attention", context, kruskal)
    table = summary.summary_table([row, row])
    assert list(table.columns[: len(CONTRACT)]) == CONTRACT
    assert table.loc[0, "kruskal_rank_estimate"] == 1
    assert table.loc[0, "kruskal_certificate"] == "dependent_pair"
    assert table.loc[0, "duplicate_pairs"] == 1
    assert list(summary.summary_table([]).columns) == CONTRACT
    # the stage's outcomes, written beside the numbers (the report reads them back)
    assert table.loc[0, "scaling"] == "equilibrate"
    assert table.loc[0, "context_outcome"] == Outcome.DOES_NOT_APPLY.value
    assert table.loc[0, "kruskal_outcome"] == Outcome.DOES_NOT_APPLY.value
    assert table.loc[0, "theorem1_outcome"] == Outcome.DOES_NOT_APPLY.value
    assert (table.loc[0, "contexts_applies"], table.loc[0, "contexts_fails"]) == (39, 1)
    assert table.loc[0, "paper_a_p_n"] == raw.p[6]


def test_p_at_n_beyond_t_or_d():
    x = np.random.default_rng(1).standard_normal((10, 8))
    raw = kruskal_profile(x, samples=5, scaling="none")
    record = checks.kruskal_record(kruskal_band(x, samples=5), raw, n=9)
    assert record["p_n"] == 0.0  # 9 vectors in R^8 are always dependent
    assert record["paper_a"]["p_n"] == 0.0
    assert record["outcome_n"] == Outcome.DOES_NOT_APPLY.value
    x = np.random.default_rng(1).standard_normal((6, 8))
    raw = kruskal_profile(x, samples=5, scaling="none")
    record = checks.kruskal_record(kruskal_band(x, samples=5), raw, n=4)
    assert math.isnan(record["p_d"])  # T = 6 < d = 8: no d-subset to test
    assert record["outcome_d"] == Outcome.NOT_TESTED.value
    assert record["p_n"] == 1.0
    # 5 orderings are fewer than the band needs to say "applies"
    assert record["outcome_n"] == Outcome.TOO_CLOSE.value


def test_figures_are_drawn(layer_results, tmp_path):
    band, _, ranks = layer_results
    profile = band.profile
    save_figure(
        figures.plot_profile(checks.profile_table(profile), 6, 16, "profile"),
        tmp_path / "profile.png",
    )
    save_figure(
        figures.plot_context_ranks(checks.context_table(ranks), 6, "contexts"),
        tmp_path / "contexts.png",
    )
    for name in ("profile.png", "contexts.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_context_table_round_trips_through_csv(layer_results, tmp_path):
    _, _, ranks = layer_results
    table = checks.context_table(ranks)
    table.to_csv(tmp_path / "c.csv", index=False)
    back = pd.read_csv(tmp_path / "c.csv")
    assert back["rank"].tolist() == ranks.rank.tolist()
    assert back["full_rank"].sum() == 39
    assert back["outcome"].tolist() == [Outcome.DOES_NOT_APPLY.value] + [Outcome.APPLIES.value] * 39
    assert back["repeated_rows"].tolist() == [1] + [0] * 39
    assert back["paper_a_rank"].tolist() == ranks.raw.rank.tolist()


def test_the_null_table_is_shared_on_disk(tmp_path):
    from memcap.assumptions.null_table import null_source
    from memcap.numerics.null import null_key

    x = np.zeros((40, 12), dtype=np.float32)
    key = null_key(x, "equilibrate", 30, 0)
    first = null_source(tmp_path)(key, [4, 12])
    stored = sorted(p.name for p in tmp_path.iterdir())
    assert stored == [f"T40_d12_float32_equilibrate_S30_seed0_k{k}.npz" for k in (12, 4)]
    again = null_source(tmp_path)(key, [4])
    for name in ("ratio", "concentration", "censored"):
        np.testing.assert_array_equal(getattr(again[4], name), getattr(first[4], name))
    assert again[4].head(10).samples == 10
    # a table of an older layout is recomputed, not trusted
    np.savez(tmp_path / stored[1], k=4, ratio=np.ones(30))
    redone = null_source(tmp_path)(key, [4])
    np.testing.assert_array_equal(redone[4].ratio, first[4].ratio)


def test_the_estimate_at_a_line_reads_only_profiles_at_or_above_it():
    profiles = [(1e-4, 400), (1e-3, 64), (1e-5, 600)]  # (tolerance, estimate): τ, 10·τ, τ/10
    assert error_estimate(profiles, 2e-6, cap=767) == 600  # every profile resolves the line
    assert error_estimate(profiles, 2e-5, cap=767) == 400  # τ/10 lies below it: left out
    assert error_estimate(profiles, 5e-4, cap=767) == 64
    assert error_estimate(profiles, 2e-6, cap=300) == 300  # an exact proof caps it
    assert error_estimate(profiles, 1e-2, cap=767) is None  # no profile reaches the line


def test_the_estimates_at_the_measured_error_hold_on_every_sampled_prefix():
    """Every sampled k-subset up to each estimate lies above its line (σ_min/σ_max of the
    orderings' prefixes, computed again), and the stage writes both into summary.csv."""
    rng = np.random.default_rng(4)
    rank8 = rng.standard_normal((60, 8)) @ rng.standard_normal((8, 24))
    queries = (rank8 + 1e-4 * rng.standard_normal((60, 24))).astype(np.float32)
    # τ = 24·eps(float32) = 2.9e-6: the zero line 2e-7 lies under τ/10, the clear line under τ
    band = kruskal_band(queries, samples=30, decide=[6, 24], error=ErrorScale(1e-7, "test"))
    at_error = error_estimates(band)
    assert at_error["zero_line"] == pytest.approx(2e-7)
    assert at_error["clear_line"] == pytest.approx(2e-6)
    assert at_error["independent"] == max(band.loose.estimate, band.profile.estimate)
    assert at_error["clear"] == max(band.profile.estimate, band.strict.estimate)
    assert at_error["independent"] > at_error["clear"] > 8  # the noise lifts the rank above 8
    assert at_error["independent"] >= at_error["clear"] >= 1
    for key, line in (("independent", "zero_line"), ("clear", "clear_line")):
        prefixes = prefix_ratios(band.decider.x, band.decider.orders, at_error[key])
        assert (prefixes.ratio > at_error[line]).all(), key
    raw = kruskal_profile(queries, samples=30, scaling="none")
    row = summary.summary_row(
        "m",
        "1",
        checks.context_record(context_ranks(np.random.default_rng(5).standard_normal((4, 6, 24)))),
        checks.kruskal_record(band, raw, 6),
    )
    assert row["kruskal_error_estimate"] == at_error["independent"]
    assert row["kruskal_error_estimate_clear"] == at_error["clear"]
    assert (
        f"sampled: {at_error['independent']} independent within it, "
        f"{at_error['clear']} a decade clear of it"
    ) in row["kruskal_evidence"]
    assert f"Kruskal rank at τ ≈ {band.profile.estimate}" in row["kruskal_evidence"]
