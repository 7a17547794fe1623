"""A GPU extraction's code path on the CPU: context ranks solved on a pool of host threads
(``memcap.devices.host_pool``, which a GPU job gets) give the files the CPU path writes, for
tiny random GPT-2 and Llama architectures in bfloat16 (configs/scale.yaml's two decoders)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tiny_sizes import SIZES

from memcap.extract import job
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.job import ExtractOutputs, extract_layers

LAYERS = (0, 1, 2, 3, "random_attention")
DETAIL = (0, 1, "random_attention")


def extract(model: str, folder: Path) -> dict:
    """Every layer of a tiny decoder (contexts of the detail layers), T = 40 windows of 16."""
    raw = {
        "name": f"tiny-{model}",
        "family": "decoder",
        "model": model,
        "model_kwargs": SIZES[model],
        "weights": "random",
        "precision": "bfloat16",
        "tokenizer": "byte-bpe",
        "layers": list(LAYERS),
        "n": 16,
        "data": {"source": "wikipedia", "T": 40},
    }
    entry = model_entry(raw, 0, 0)
    outputs = {
        layer: ExtractOutputs(
            folder / f"{layer}/q.npy",
            folder / f"{layer}/c.npy" if layer in DETAIL else None,
            folder / f"{layer}/p.json",
            folder / f"{layer}/ranks.npz",
        )
        for layer in LAYERS
    }
    extract_layers(entry, outputs, ExtractSettings(batch_size=16, device="cpu"))
    return outputs


@pytest.mark.parametrize("model", ["GPT2Config", "LlamaConfig"])
def test_ranks_solved_on_host_threads_equal_the_cpu_path(model, tmp_path, monkeypatch):
    plain = extract(model, tmp_path / "plain")
    pools = []

    def pool(device):
        pools.append(ThreadPoolExecutor(3))
        return pools[-1]

    monkeypatch.setattr(job, "host_pool", pool)
    pooled = extract(model, tmp_path / "pooled")
    assert len(pools) == 1  # one pool per job, shut down with it
    assert pools[0]._shutdown
    for layer in LAYERS:
        a, b = plain[layer], pooled[layer]
        assert np.array_equal(np.load(a.queries), np.load(b.queries))
        if layer in DETAIL:
            assert np.array_equal(np.load(a.contexts), np.load(b.contexts))
        with np.load(a.context_ranks) as x, np.load(b.context_ranks) as y:
            assert sorted(x) == sorted(y)
            for key in x:
                assert np.array_equal(x[key], y[key]), (layer, key)
