"""Input-level duplicate audit: identical / overlapping windows, duplicated images."""

from __future__ import annotations

import numpy as np
import pytest

from memcap.extract.audit import audit_verdict, image_audit, text_audit


def test_distinct_windows_from_distinct_documents_pass():
    tokens = np.arange(40).reshape(4, 10)
    audit = text_audit(tokens, np.array([0, 1, 2, 3]), np.zeros(4, int), stream=False)
    assert audit["identical_windows"] == audit["overlapping_windows"] == 0
    assert audit["distinct_documents"] == 4 and audit["examples_sharing_a_document"] == 0
    assert audit_verdict(audit).startswith("inputs distinct")


def test_identical_and_overlapping_windows_are_counted():
    tokens = np.array([[1, 2, 3], [1, 2, 3], [4, 5, 6], [7, 8, 9]])
    documents = np.array([0, 1, 2, 2])
    offsets = np.array([0, 0, 0, 2])  # windows of 3 at 0 and 2 share one token
    audit = text_audit(tokens, documents, offsets, stream=False)
    assert audit["identical_windows"] == 1 and audit["overlapping_windows"] == 1
    assert audit["examples_sharing_a_document"] == 2
    assert audit_verdict(audit).startswith("inputs duplicated")


def test_image_audit_finds_identical_near_identical_and_overlapping_inputs():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (5, 8, 8, 3)).astype(np.uint8)
    thumbs = np.concatenate([base, base[:1], np.clip(base[1:2] + 1, 0, 255)])  # 7 inputs
    sources = [0, 1, 2, 3, 4, 0, 1]
    boxes = [(0, 0, 10, 10), None, None, None, None, (5, 5, 20, 20), None]
    inputs = [[(s, b)] for s, b in zip(sources, boxes, strict=True)]
    audit = image_audit(thumbs, inputs, source_count=6)
    assert audit["identical_images"] == 1
    assert audit["near_identical_pairs"] == 2  # the copy and the brightened one
    assert audit["overlapping_crops"] == 2  # boxes of photo 0 intersect; photo 1 twice whole
    assert audit["source_photographs"] == 6 and audit["photographs_used"] == 5
    assert audit["max_inputs_per_photograph"] == 2
    assert audit_verdict(audit).startswith("inputs duplicated")


def test_distinct_random_images_pass_the_audit():
    thumbs = np.random.default_rng(1).integers(0, 255, (20, 8, 8, 3)).astype(np.uint8)
    boxes = [(0, 0, 5, 5), (5, 5, 9, 9)] + [None] * 18
    inputs = [[(s, b)] for s, b in zip([0, 0, *range(1, 19)], boxes, strict=True)]
    audit = image_audit(thumbs, inputs, source_count=19)
    assert audit["identical_images"] == audit["near_identical_pairs"] == 0
    assert audit["overlapping_crops"] == 0 and audit["max_pair_cosine"] < 0.99
    assert audit_verdict(audit).startswith("inputs distinct")


def test_mosaics_sharing_a_photograph_region_are_counted_once_per_pair():
    thumbs = np.random.default_rng(2).integers(0, 255, (3, 8, 8, 3)).astype(np.uint8)
    inputs = [
        [(0, (0, 0, 10, 10)), (1, (0, 0, 10, 10))],
        [(0, (5, 5, 15, 15)), (1, (2, 2, 8, 8))],  # shares two regions with input 0
        [(0, (20, 20, 30, 30)), (2, None)],
    ]
    audit = image_audit(thumbs, inputs, source_count=3)
    assert audit["overlapping_crops"] == 1 and audit["photographs_used"] == 3
    assert audit["max_inputs_per_photograph"] == 3


@pytest.mark.parametrize("family", ["vit", "bert", "gpt2"])
def test_every_extraction_writes_its_input_audit(family, tmp_path):
    """Tiny models of configs/test.yaml (T = 48): the default inputs pass their own audit."""
    import json
    from pathlib import Path

    import yaml

    from memcap.extract.config import ExtractSettings
    from memcap.extract.entries import model_entries
    from memcap.extract.job import ExtractOutputs, run_extraction

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((root / "configs" / "test.yaml").read_text())
    entry = {e.family: e for e in model_entries(config)}[family]
    outputs = ExtractOutputs(tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "p.json")
    run_extraction(entry, 0, ExtractSettings(batch_size=16, device="cpu"), outputs)
    provenance = json.loads(outputs.provenance.read_text())
    audit = provenance["input_audit"]
    assert audit["examples"] == 48 and audit_verdict(audit).startswith("inputs distinct")
    if family == "vit":
        assert audit["source_photographs"] == 21 and provenance["mosaic"] == 2
        assert "2 x 2 mosaics" in provenance["data_source"]
    else:
        assert audit["distinct_documents"] == 48 and "Wikipedia" in provenance["data_source"]
