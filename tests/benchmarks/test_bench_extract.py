"""benchmarks/bench_extract.py compares the same layer both ways (tiny random ViT, 2 images)."""

from benchmark_runs import run_benchmark


def _run(layer: int):
    return run_benchmark(
        "bench_extract.py", "--model", "vit_tiny_patch16_224", "--layer", str(layer),
        "--examples", "2", "--batch-size", "2", "--threads", "1",
    )  # fmt: skip


def test_layer_zero_is_the_embeddings_on_both_paths():
    run = _run(0)
    assert run.returncode == 0, run.stderr
    assert "outputs equal (allclose): True" in run.stdout
    assert run.stdout.splitlines()[-1].startswith("RATIO")


def test_a_layer_beyond_the_depth_is_refused_by_name():
    run = _run(13)
    assert run.returncode == 2 and "--layer 13" in run.stderr and "0 to 12" in run.stderr
