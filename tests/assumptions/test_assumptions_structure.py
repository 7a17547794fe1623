"""Structure named by detection: each detector on a matrix built to have it, and on stored
embeddings of the default run where it occurs (tests/data/real_embeddings.npz)."""

from pathlib import Path

import numpy as np
import pytest

from memcap.assumptions import structure
from memcap.numerics.decision import Proof, Reading, SizeDecision
from memcap.numerics.error import ErrorScale, stored_error

FLOAT32 = stored_error(np.float32)
STORED = Path(__file__).resolve().parents[1] / "data" / "real_embeddings.npz"


def layer_norm(rows: int, d: int, seed: int = 0) -> np.ndarray:
    """LayerNorm without affine (γ = 1, β = 0) of Gaussian tokens, stored in float32."""
    x = np.random.default_rng(seed).standard_normal((rows, d))
    x = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)
    return x.astype(np.float32)


def test_layer_norm_centring_is_found_and_forces_rank_d_minus_1():
    found = structure.layernorm_centring(layer_norm(300, 64), FLOAT32)
    assert found is not None and found.bound == 63
    assert "general position is impossible" in found.detail
    # an affine LayerNorm with β ≠ 0 leaves the hyperplane through the origin: nothing forced
    shifted = layer_norm(300, 64) + np.float32(0.1)
    assert structure.layernorm_centring(shifted, FLOAT32) is None
    gaussian = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)
    assert structure.layernorm_centring(gaussian, FLOAT32) is None


def test_a_dominant_shared_component_is_named_with_the_centred_set_beside_it():
    rng = np.random.default_rng(2)
    shared = rng.standard_normal(64) * 30
    varying = rng.standard_normal((200, 4)) @ rng.standard_normal((4, 64))  # 4 directions
    found = structure.spectrum((shared + varying).astype(np.float32), FLOAT32)
    assert found.shared_share > 0.99 and found.centred_k90 <= 4 and found.centred_rank == 4
    named = structure.dominant_component(found)
    assert named is not None and "rank 4 of 64" in named.detail
    assert structure.dominant_component(structure.spectrum(varying, FLOAT32)) is None


def test_too_few_distinct_inputs_from_the_extraction_record():
    images = {"T": 400, "source_images": [f"p{i}" for i in range(21)], "crops": 380}
    found = structure.distinct_inputs(images)
    assert found is not None and "400 examples are crops, flips and mosaics of 21" in found.detail
    text = {"T": 800, "input_audit": {"distinct_documents": 800, "identical_windows": 3}}
    assert "3 pairs of identical token windows" in structure.distinct_inputs(text).detail
    enough = {"T": 800, "input_audit": {"distinct_documents": 800, "identical_windows": 0}}
    assert structure.distinct_inputs(enough) is None


def test_identical_queries_bound_the_kruskal_rank_by_one():
    x = np.random.default_rng(3).standard_normal((10, 8)).astype(np.float32)
    x[7] = x[2]
    assert structure.identical_queries(x, "1").bound == 1
    same = np.repeat(x[:1], 10, axis=0)
    assert (
        "does not depend on the input at layer 0" in structure.identical_queries(same, "0").detail
    )
    assert structure.identical_queries(x[:7], "1") is None


def test_every_failing_or_close_check_names_a_mechanism():
    x = np.random.default_rng(4).standard_normal((100, 32)).astype(np.float32)
    structures, found = structure.detect(x, FLOAT32, {}, "1")
    assert structures == []
    close = SizeDecision(16, "too close to call", Reading.LESS, decades=2.0)
    for outcome in ("does not apply", "too close to call"):
        assert structure.explain(close, outcome, structures, found).startswith(
            "concentrated spectrum"
        )
    # an applying check names its structure too when it reads less independent than random
    assert structure.explain(close, "applies", structures, found).startswith("concentrated")
    random = SizeDecision(16, "applies", Reading.RANDOM)
    assert structure.explain(random, "applies", structures, found) == ""
    lnorm = layer_norm(100, 32)
    named, spec = structure.detect(lnorm, FLOAT32, {}, "1")
    proof = Proof("spectrum", 32, "σ_32(X) under the zero line")
    decided = SizeDecision(32, "does not apply", Reading.DEPENDENT, proof=proof)
    assert structure.explain(decided, "does not apply", named, spec).startswith(
        "LayerNorm centring"
    )


@pytest.mark.parametrize("relative", [1e-7, 1e-5])
def test_the_measured_error_sets_how_close_to_the_hyperplane_counts(relative):
    x = layer_norm(50, 16).astype(np.float64)
    x += relative * np.random.default_rng(5).standard_normal(x.shape)  # off the hyperplane
    found = structure.layernorm_centring(x, ErrorScale(1e-4, "test"))
    assert found is not None  # within 2e-4 of it
    assert structure.layernorm_centring(x, ErrorScale(1e-9, "test")) is None


def test_structures_are_named_on_stored_embeddings_of_the_default_run():
    stored = np.load(STORED)
    # bert-base-random block 1: LayerNorm at initialisation (γ = 1, β = 0), the measured error
    bert = structure.layernorm_centring(stored["bert_random_l1_queries"], ErrorScale(1.2e-6, "m"))
    assert bert is not None and bert.bound == 767
    # DINOv2-S/14 random_attention: one shared vector, 21 photographs, few input directions
    photographs = {"T": 400, "source_images": [f"p{i}" for i in range(21)], "crops": 380}
    found, spec = structure.detect(
        stored["dinov2_random_attention_queries"], ErrorScale(6.7e-7, "m"), photographs, "RA"
    )
    assert {s.name for s in found} == {"dominant shared component", "too few distinct inputs"}
    assert spec.shared_share > 0.99 and spec.centred_k90 <= 5
    # MiniLM block 3 has neither hyperplane nor identical queries
    minilm = stored["minilm_l3_queries"]
    assert structure.layernorm_centring(minilm, ErrorScale(4.2e-6, "m")) is None
    assert structure.identical_queries(minilm, "3") is None
