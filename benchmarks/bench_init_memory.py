"""Peak host memory of building a random bfloat16 model: ours vs float32-then-cast.

Ours (``memcap.extract.registry.create_model`` with ``precision: bfloat16``) draws the
weights on the job's device at bfloat16 directly; the naive way builds the model in float32
and casts it, so a float32 copy of every weight exists first.
Each way runs in a fresh interpreter (peak RSS cannot be reset); the figure compared is the
peak RSS growth over the interpreter's own after the imports. Expected: ours about the
bfloat16 size (2 bytes per parameter), the naive way about the float32 size (4 bytes), so
``RATIO <naive growth / ours>`` about 2. A mid-size Llama-architecture model by default.

    .venv/bin/python benchmarks/bench_init_memory.py --hidden 2048 --layers 8
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

from _results import record


def _rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(way: str, hidden: int, layers: int) -> dict[str, float]:
    """Build the model one way in this process; its parameter count and peak RSS growth."""
    import torch
    import transformers  # noqa: F401 - imported before the baseline is taken

    from memcap.extract.entries import model_entry
    from memcap.extract.registry import create_model, parameter_count

    kwargs = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // 128,
        "intermediate_size": int(hidden * 2.6875),  # Llama-2-7B's 11008 / 4096
        "vocab_size": 32000,
    }
    raw = {
        "name": "bench",
        "family": "decoder",
        "model": "LlamaConfig",
        "model_kwargs": kwargs,
        "precision": "bfloat16",
        "tokenizer": "byte-bpe",
    }
    entry = model_entry(raw, 0, 0)
    baseline = _rss_mb()
    if way == "ours":
        module = create_model(entry, device="cpu").module
    else:  # float32 first, then the cast: the float32 copy is the peak
        torch.manual_seed(entry.seed)
        config = transformers.LlamaConfig(**kwargs)
        module = transformers.AutoModel.from_config(config).to(torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in module.parameters())
    return {"parameters": parameter_count(module), "growth_mb": _rss_mb() - baseline}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--way", choices=["ours", "naive"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:  # the child: one way, one JSON line
        print(json.dumps(build(args.way, args.hidden, args.layers)))
        return
    results = {}
    for way in ("ours", "naive"):
        command = [sys.executable, __file__, f"--hidden={args.hidden}", f"--layers={args.layers}"]
        done = subprocess.run([*command, f"--way={way}"], capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stderr)
        results[way] = json.loads(done.stdout.strip().splitlines()[-1])
    parameters = results["ours"]["parameters"]
    print(f"Llama architecture, d = {args.hidden}, {args.layers} blocks: {parameters:,} parameters")
    sizes = f"bfloat16 {parameters * 2 / 2**20:.0f} MB, float32 {parameters * 4 / 2**20:.0f} MB"
    print(f"weights: {sizes}")
    for way, result in results.items():
        print(f"{way:5s}: peak RSS growth {result['growth_mb']:.0f} MB")
    naive_mb, ours_mb = results["naive"]["growth_mb"], results["ours"]["growth_mb"]
    record(
        __file__,
        f"peak host RSS of a random bfloat16 Llama ({parameters:,} parameters) drawn in "
        "bfloat16 vs built in float32 and cast",
        naive_mb / ours_mb,
        ("drawn in bfloat16", ours_mb, "MB"),
        ("float32, then cast", naive_mb, "MB"),
        ratio_is="float32-then-cast peak RSS growth / bfloat16 peak RSS growth",
        repeats=1,
        settings={k: v for k, v in vars(args).items() if k != "way"},
        extra={"parameters": parameters},
    )
    print(f"RATIO {naive_mb / ours_mb:.2f}")


if __name__ == "__main__":
    main()
