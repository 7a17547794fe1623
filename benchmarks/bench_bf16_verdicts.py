"""Do bfloat16 and float32 forwards give the same verdicts? One model, both precisions.

configs/scale.yaml runs its models in bfloat16 (a 7B model in float32 would not leave room on
one GPU for the checks). This runs the production path twice on the CPU - extraction
(``memcap.extract.job.extract_layers``, the same random weights: bfloat16 draws are the
float32 draws rounded) then both assumption checks (``memcap.assumptions.checks.check_layer``)
- at ``precision: float32`` and ``precision: bfloat16``, and prints per layer the context
rank (Assumption 2), the Kruskal estimate and P(n), P(d) (Assumption 1, general position),
P(n) by paper A's rule (the stored values) and the stage's Theorem 1 outcome, with their
differences. Stored vectors are float32 either
way: the difference is the forward's rounding alone. Default: a random GPT-2 architecture of
width d = 256 (4 heads; a CPU's bfloat16 matrix products are slow - GPT-2 small, d = 768 at
T = 800, took over 30 minutes here), blocks 0-2 and random_attention, T = 320 >= d Wikipedia
windows of n = 64 tokens, 500 orderings.

    .venv/bin/python benchmarks/bench_bf16_verdicts.py --threads 1
    .venv/bin/python benchmarks/bench_bf16_verdicts.py --width 768 --heads 12 --T 800
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _results import record

from memcap.assumptions.checks import check_layer
from memcap.assumptions.depth import depth_row
from memcap.assumptions.settings import AssumptionsSettings
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.job import ExtractOutputs, extract_layers
from memcap.extract.layer_spec import layer_name
from memcap.numerics import load_context_ranks

PRECISIONS = ("float32", "bfloat16")
COLUMNS = (
    "context_full_rank_fraction",
    "kruskal_estimate",
    "p_n",
    "p_d",
    "paper_a_p_n",
    "theorem1",
)


def run(raw: dict, precision: str, root: Path, samples: int, threads: int) -> dict[str, dict]:
    """Extract every layer at ``precision``, check each; the depth-table row per layer."""
    entry = model_entry({**raw, "precision": precision}, 0, 0)
    outputs = {
        layer: ExtractOutputs(
            queries=root / precision / layer_name(layer) / "queries.npy",
            contexts=None,
            provenance=root / precision / layer_name(layer) / "provenance.json",
            context_ranks=root / precision / layer_name(layer) / "context_ranks.npz",
        )
        for layer in entry.layers
    }
    start = time.perf_counter()
    extract_layers(entry, outputs, ExtractSettings(batch_size=32, device="cpu"), threads)
    print(f"{precision}: extracted {len(outputs)} layers in {time.perf_counter() - start:.1f} s")
    settings, rows = AssumptionsSettings(samples=samples), {}
    for layer, out in outputs.items():
        queries = np.load(out.queries)
        ranks = load_context_ranks(out.context_ranks)
        name = layer_name(layer)
        checks = check_layer(
            queries,
            ranks,
            ranks.n,
            settings,
            samples,
            torch.device("cpu"),
            extraction=json.loads(Path(out.provenance).read_text()),
            layer=name,
        )
        rows[name] = depth_row("bench", name, "detail", checks.context, checks.kruskal)
        rows[name] |= {"p_d": checks.kruskal["p_d"], "queries": queries}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256, help="GPT-2's n_embd (d)")
    parser.add_argument("--heads", dest="H", type=int, default=4)
    parser.add_argument("--layers", default="0-2", help="blocks (a range); + random_attention")
    parser.add_argument("--T", type=int, default=320)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    raw = {
        "name": "bench",
        "family": "decoder",
        "model": "GPT2Config",
        "model_kwargs": {"n_embd": args.width, "n_head": args.H},
        "tokenizer": "byte-bpe",
        "layers": [args.layers, "random_attention"],
        "n": args.n,
        "data": {"source": "wikipedia", "T": args.T},
    }
    with tempfile.TemporaryDirectory() as folder:
        results = {p: run(raw, p, Path(folder), args.samples, args.threads) for p in PRECISIONS}
    fp32, bf16 = (results[p] for p in PRECISIONS)
    print(f"GPT-2, d = {args.width}, random; T = {args.T}, n = {args.n}, {args.samples} orderings")
    print(f"{'layer':>16} {'column':>26} {'float32':>10} {'bfloat16':>10}")
    changed, estimate_gap = 0, 0
    for layer, row in fp32.items():
        other = bf16[layer]
        scale = np.abs(row["queries"]).max()
        error = np.abs(row["queries"] - other["queries"]).max() / scale
        print(f"{layer:>16} {'query max rel. diff':>26} {error:>21.2e}")
        for column in COLUMNS:
            a, b = row[column], other[column]
            changed += column == "theorem1" and a != b
            if column == "kruskal_estimate" and a is not None and b is not None:
                estimate_gap = max(estimate_gap, abs(int(a) - int(b)))
            print(f"{layer:>16} {column:>26} {a!s:>10} {b!s:>10}")
    record(
        __file__,
        "the assumption checks on bfloat16 vs float32 extraction of the same random weights "
        f"(GPT-2, d = {args.width}, T = {args.T}, n = {args.n}, {args.samples} orderings)",
        None,
        ("bfloat16", None, ""),
        ("float32", None, ""),
        ratio_is="no ratio: verdicts compared",
        repeats=1,
        settings=args,
        summary=f"{changed} of {len(fp32)} Theorem 1 outcomes differ, Kruskal estimates "
        f"within {estimate_gap}",
        extra={"theorem1_differ": int(changed), "kruskal_estimate_max_difference": estimate_gap},
    )
    print(f"Theorem 1 outcomes that differ: {changed} of {len(fp32)} layers")


if __name__ == "__main__":
    main()
