"""Assumption 2's context ranks streamed during extraction equal those of the stored contexts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from snakemake.utils import validate

from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entries
from memcap.extract.job import ExtractOutputs, extract_layers
from memcap.numerics import ContextRankStream, context_ranks, load_context_ranks

ROOT = Path(__file__).resolve().parents[2]
LAYERS = (0, 1, "random_attention")


def _entries():
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return {entry.family: entry for entry in model_entries(config)}


@pytest.mark.parametrize("family", ["vit", "bert", "gpt2"])
def test_streamed_ranks_equal_ranks_of_stored_contexts(family, tmp_path):
    entry = _entries()[family]
    outputs = {
        layer: ExtractOutputs(
            *(tmp_path / str(layer) / f for f in ("q.npy", "c.npy", "p.json", "ranks.npz"))
        )
        for layer in LAYERS
    }
    extract_layers(entry, outputs, ExtractSettings(batch_size=16, device="cpu"))
    for out in outputs.values():
        streamed = load_context_ranks(out.context_ranks)
        stored = context_ranks(np.load(out.contexts, mmap_mode="r"), chunk=7)
        assert len(streamed.rank) == entry.data.T
        assert streamed.scaling == stored.scaling == "equilibrate"
        # the decision (equilibrated) and paper A's rule beside it (the stored values)
        for ours, theirs in ((streamed, stored), (streamed.raw, stored.raw)):
            assert_same_ranks(ours, theirs)
        np.testing.assert_array_equal(streamed.repeated_rows, stored.repeated_rows)
        np.testing.assert_array_equal(streamed.zero_rows, stored.zero_rows)


def assert_same_ranks(streamed, stored):
    np.testing.assert_array_equal(streamed.rank, stored.rank)
    # σ_min of a rank-deficient context is rounding (~1e-16·σ_max): compared on that scale
    atol = 1e-12 * stored.sigma_max.max()
    np.testing.assert_allclose(streamed.sigma_min, stored.sigma_min, rtol=1e-10, atol=atol)
    np.testing.assert_allclose(streamed.sigma_max, stored.sigma_max, rtol=1e-10)
    np.testing.assert_array_equal(streamed.full_rank, stored.full_rank)
    assert (streamed.rtol, streamed.n, streamed.d) == (stored.rtol, stored.n, stored.d)


def test_stream_keeps_deficient_ranks_and_the_tolerance_rule():
    rng = np.random.default_rng(0)
    contexts = rng.standard_normal((10, 4, 6)).astype(np.float32)
    contexts[3, 1] = contexts[3, 0]  # rank 3
    contexts[7] = 0  # rank 0
    stream = ContextRankStream(4, 6)
    for start in range(0, 10, 3):
        stream.add(contexts[start : start + 3])
    streamed, stored = stream.result(), context_ranks(contexts)
    np.testing.assert_array_equal(streamed.rank, stored.rank)
    assert streamed.rank[3] == 3 and streamed.rank[7] == 0
    assert streamed.rtol == stored.rtol
    np.testing.assert_array_equal(streamed.raw.rank, stored.raw.rank)
    assert streamed.raw.rank[3] == 3 and streamed.raw.rank[7] == 0
    # the exact proofs: one repeated row in #3; four zero rows (three of them repeats) in #7
    assert streamed.repeated_rows.tolist() == [0, 0, 0, 1, 0, 0, 0, 3, 0, 0]
    assert streamed.zero_rows.tolist() == [0] * 7 + [4, 0, 0]
    # scaling="none": paper A's rule alone, the same ranks as the equilibrated run's twin
    raw = ContextRankStream(4, 6, scaling="none")
    raw.add(contexts)
    assert raw.result().raw is None and raw.result().scaling == "none"
    np.testing.assert_array_equal(raw.result().rank, stored.raw.rank)
