"""Truncated forward (ours) vs the full-depth model (naive) for one layer, same inputs.

The naive way runs every block of the model and keeps block k's output with a hook (what
``output_hidden_states`` / a feature hook costs); ours runs the embeddings and the first k
blocks only. Both run on the same batches in one process; the last line is
``RATIO <naive seconds / ours seconds>``.

    .venv/bin/python benchmarks/bench_extract.py --examples 32 --layer 1
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import record

from memcap.extract.entries import model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.layers import LayerExtractor
from memcap.extract.registry import create_model


def full_depth_layer(model: torch.nn.Module, images: torch.Tensor, layer: int) -> torch.Tensor:
    """Run the whole ViT and keep layer ``layer`` through a hook: block ``layer``'s output, or
    for layer 0 the embeddings (the first block's input)."""
    kept: list[torch.Tensor] = []
    if layer == 0:
        hook = model.blocks[0].register_forward_pre_hook(lambda _m, args: kept.append(args[0]))
    else:
        hook = model.blocks[layer - 1].register_forward_hook(lambda _m, _a, out: kept.append(out))
    try:
        model.forward_features(images)
    finally:
        hook.remove()
    return kept[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_base_patch16_224", help="timm ViT name")
    parser.add_argument(
        "--layer", type=int, default=1, help="block whose output is wanted (0: the embeddings)"
    )
    parser.add_argument("--examples", dest="T", type=int, default=32, help="images per run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    raw = {"name": "bench", "family": "vit", "model": args.model, "data": {"T": args.T}}
    entry = model_entry(raw, 0, 0)
    loaded = create_model(entry)
    if not 0 <= args.layer <= loaded.depth:
        parser.error(f"--layer {args.layer}: {args.model} has layers 0 to {loaded.depth}")
    batches = list(prepare_inputs(entry, loaded, loaded.max_tokens, args.batch_size).batches)
    ours = LayerExtractor(loaded.module, loaded.width, args.layer, seed=0).eval()

    with torch.inference_mode():
        ours(batches[0][:2])  # warm-up of both code paths (allocator, kernels)
        full_depth_layer(loaded.module, batches[0][:2], args.layer)
        start = time.perf_counter()
        truncated = [ours(batch) for batch in batches]
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        full = [full_depth_layer(loaded.module, batch, args.layer) for batch in batches]
        naive_s = time.perf_counter() - start

    same = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(truncated, full, strict=True))
    print(f"model {args.model}: depth {loaded.depth}, layer {args.layer}, {args.T} images")
    print(f"truncated forward (ours): {ours_s:.2f} s, {args.T / ours_s:.1f} images/s")
    print(f"full-depth model (naive): {naive_s:.2f} s, {args.T / naive_s:.1f} images/s")
    print(f"outputs equal (allclose): {same}")
    record(
        __file__,
        f"a truncated forward to block {args.layer} vs the full-depth model with a hook "
        f"({args.model}, {args.T} images)",
        naive_s / ours_s,
        ("truncated forward", ours_s, "s"),
        ("full-depth model", naive_s, "s"),
        ratio_is="full-depth seconds / truncated seconds",
        repeats=1,
        settings=args,
        extra={"outputs_equal": same, "depth": loaded.depth},
    )
    print(f"RATIO {naive_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
