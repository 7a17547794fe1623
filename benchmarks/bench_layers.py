"""Every layer of a model from one pass (ours) vs one truncated pass per layer, same inputs.

Ours runs the embeddings and all L blocks once per batch and keeps every block's output
(``MultiLayerExtractor``); the per-layer way runs a truncated forward for each of layers 0 … L
(``LayerExtractor``), L(L+1)/2 blocks in all, so the expected speedup is about (L+1)/2. Both
run on the same batches in one process and their hidden states are checked equal; the last
line is ``RATIO <per-layer seconds / one-pass seconds>``.

    .venv/bin/python benchmarks/bench_layers.py --examples 16
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import record

from memcap.extract.entries import model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.layers import LayerExtractor, MultiLayerExtractor
from memcap.extract.registry import create_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_small_patch16_224", help="timm ViT name")
    parser.add_argument("--examples", dest="T", type=int, default=16, help="images per run")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    raw = {"name": "bench", "family": "vit", "model": args.model, "data": {"T": args.T}}
    entry = model_entry(raw, 0, 0)
    loaded = create_model(entry)
    batches = list(prepare_inputs(entry, loaded, loaded.max_tokens, args.batch_size).batches)
    layers = tuple(range(loaded.depth + 1))
    one_pass = MultiLayerExtractor(loaded.module, loaded.width, layers, seed=0).eval()
    per_layer = [LayerExtractor(loaded.module, loaded.width, x, seed=0).eval() for x in layers]

    with torch.inference_mode():
        one_pass(batches[0][:2])  # warm-up (allocator, kernels)
        start = time.perf_counter()
        ours = [one_pass(batch) for batch in batches]
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        theirs = [[extractor(batch) for extractor in per_layer] for batch in batches]
        per_layer_s = time.perf_counter() - start
    for states, reference in zip(ours, theirs, strict=True):
        for layer, expected in zip(layers, reference, strict=True):
            torch.testing.assert_close(states[layer], expected)

    blocks = loaded.depth
    print(f"model {args.model}: {blocks} blocks, layers 0..{blocks}, {args.T} examples")
    print(f"one pass:  {ours_s:.2f} s ({blocks} blocks per batch)")
    print(f"per layer: {per_layer_s:.2f} s ({blocks * (blocks + 1) // 2} blocks per batch)")
    print(f"expected about (L+1)/2 = {(blocks + 1) / 2:.1f}")
    record(
        __file__,
        f"all layers of a model in one forward vs one truncated forward per layer "
        f"({args.model}, {blocks} blocks, {args.T} images)",
        per_layer_s / ours_s,
        ("one pass", ours_s, "s"),
        ("one truncated forward per layer", per_layer_s, "s"),
        ratio_is="per-layer seconds / one-pass seconds",
        repeats=1,
        settings=args,
        extra={"expected": (blocks + 1) / 2},
    )
    print(f"RATIO {per_layer_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
