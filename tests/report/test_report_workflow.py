"""The render_report rule in a dry run: its inputs, and `report.enabled` switching it off."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(tmp_path: Path, *configfiles: str) -> str:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "--directory", str(tmp_path),
         "--configfile", *configfiles],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


def test_report_reads_every_stage_and_every_upstream_benchmark(tmp_path):
    out = _dry_run(tmp_path, "configs/test.yaml")
    job = out.split("rule render_report:", 1)[1].split("\n\n", 1)[0]
    inputs = job.split("input:", 1)[1].split("\n", 1)[0]
    for expected in (
        "results/extract/vit-tiny/0/provenance.json",
        "results/assumptions/summary.csv",
        "results/assumptions/bert-tiny/1/kruskal_profile.csv",
        "results/synthetic/fits.csv",
        "results/synthetic/laws.csv",
        "results/aot/laws.csv",
        "results/capacity/real.csv",
        "results/aot/figures",
        # Benchmarks of intermediate jobs too, found by walking the rules back.
        "benchmarks/results/extract_model/gpt2-tiny.tsv",
        "benchmarks/results/run_synthetic_sweep/heads.tsv",
        "report.html.j2",
        "assumptions_kruskal_profile.rst",
        # bert-tiny's depth rows (blocks 2 and 3): provenance, and the model's depth profile.
        "results/extract/bert-tiny/3/provenance.json",
        "results/assumptions/bert-tiny/depth.csv",
        "results/assumptions/bert-tiny/depth.png",
        "benchmarks/results/check_assumptions/bert-tiny.tsv",
        "assumptions_depth.rst",
    ):
        assert expected in inputs, expected
    assert "results/assumptions/bert-tiny/3/kruskal_profile.csv" not in inputs
    assert "output: reports/report.html" in job


def test_report_enabled_false_drops_the_job(tmp_path):
    off = tmp_path / "off.yaml"
    off.write_text("report:\n  enabled: false\n")
    out = _dry_run(tmp_path, "configs/test.yaml", str(off))
    assert "render_report" not in out
