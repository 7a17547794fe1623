"""The assumptions rules on tiny stand-in extraction outputs, through the Snakemake CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from memcap.numerics import context_ranks, save_context_ranks

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
MODEL, LAYERS, T, N, D = "tiny", ["0", "random_attention"], 40, 6, 16


def fake_extraction(workdir: Path) -> None:
    """What extract_model would write: queries, contexts (memory-mappable), provenance and the
    contexts' ranks (streamed there)."""
    rng = np.random.default_rng(0)
    for layer in LAYERS:
        out = workdir / "results" / "extract" / MODEL / layer
        out.mkdir(parents=True)
        queries = rng.standard_normal((T, D)).astype(np.float32)
        if layer == "0":
            queries[:] = queries[0]  # layer 0 [CLS]: one vector for every example
        np.save(out / "queries.npy", queries)
        contexts = rng.standard_normal((T, N, D)).astype(np.float32)
        np.save(out / "contexts.npy", contexts)
        save_context_ranks(out / "context_ranks.npz", context_ranks(contexts))
        provenance = {"model": MODEL, "layer": layer, "T": T, "n": N, "d": D, "warnings": []}
        (out / "provenance.json").write_text(json.dumps(provenance))


@pytest.mark.slow
def test_assumption_rules_write_the_contracted_summary(tmp_path):
    fake_extraction(tmp_path)
    config = {
        "device": "cpu",
        "extract": {
            "models": [
                {
                    "name": MODEL,
                    "family": "vit",
                    "model": "vit_base_patch16_224",
                    "layers": [0, "random_attention"],
                    "data": {"T": T},
                }
            ]
        },
        "assumptions": {"samples": 64, "context_chunk": 7},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [
            str(SNAKEMAKE),
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--configfile",
            str(tmp_path / "config.yaml"),
            "--cores",
            "2",
            "results/assumptions/summary.csv",
        ],  # fmt: skip
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "extract_model" not in output  # the stand-in outputs were used as they are
    summary = pd.read_csv(tmp_path / "results" / "assumptions" / "summary.csv")
    assert list(summary.columns[:10]) == [
        "model", "layer", "T", "n", "d", "samples", "context_full_rank_frac", "kruskal_p_n",
        "general_position_p_d", "kruskal_rank_estimate",
    ]  # fmt: skip
    rows = summary.set_index("layer")
    assert rows.loc["0", "kruskal_rank_estimate"] == 1
    assert rows.loc["0", "kruskal_p_n"] == 0.0
    generic = rows.loc["random_attention"]
    assert generic["kruskal_p_n"] == 1.0
    # Gaussian 16 × 16 subsets are occasionally ill-conditioned beyond float32's tolerance.
    assert D - 1 <= generic["kruskal_rank_estimate"] == generic["kruskal_rank_upper_bound"]
    assert (summary["context_full_rank_frac"] == 1.0).all()
    assert (summary["samples"] == 64).all()
    for layer in LAYERS:
        folder = tmp_path / "results" / "assumptions" / "jobs" / MODEL / layer
        profile = pd.read_csv(folder / "kruskal_profile.csv")
        assert profile["k"].tolist() == list(range(1, D + 1))
        for name in ("kruskal_profile.png", "context_rank.png"):
            assert (folder / name).stat().st_size > 1000
        record = json.loads((folder / "kruskal.json").read_text())
        assert record["versions"]["torch"] and record["settings"]["samples"] == 64
