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


def _job_line(out: str, rule: str, field: str) -> list[str]:
    job = out.split(f"rule {rule}:", 1)[1].split("\n\n", 1)[0]
    return job.split(f"{field}:", 1)[1].split("\n", 1)[0].strip().split(", ")


def test_report_reads_every_stage_target_and_every_upstream_benchmark(tmp_path):
    out = _dry_run(tmp_path, "configs/test.yaml")
    inputs = _job_line(out, "render_report", "input")
    for expected in (
        "results/extract/vit-tiny",  # every layer's files, provenance among them
        "results/assumptions/summary.csv",
        # bert-tiny's check job (its layers' checks) and depth profile (depth rows 2, 3).
        "results/assumptions/jobs/bert-tiny",
        "results/assumptions/bert-tiny/depth.csv",
        "results/assumptions/bert-tiny/depth.png",
        "results/synthetic/fits.csv",
        "results/synthetic/laws.csv",
        "results/synthetic/jobs/heads_provenance.json",
        "results/aot/jobs/all_provenance.json",
        "results/aot/laws.csv",
        "results/capacity/real.csv",
        "results/capacity/bert-tiny",
        "results/aot/figures",
        # Benchmarks of intermediate jobs too, found by walking the rules back.
        "benchmarks/results/extract_model/gpt2-tiny.tsv",
        "benchmarks/results/train_synthetic/heads.tsv",
        "benchmarks/results/train_aot/all.tsv",
        "benchmarks/results/check_assumptions/bert-tiny.tsv",
    ):
        assert expected in inputs, expected
    for source in ("report.html.j2", "assumptions_figures.rst"):  # "... (cached)"
        assert any(source in path for path in inputs), source
    # One source of truth: the page's stage inputs are exactly rule all's other targets.
    targets = set(_job_line(out, "all", "input")) - {"reports/report.html"}
    assert targets <= set(inputs)
    stage_inputs = {p for p in inputs if p.startswith("results/")}
    assert stage_inputs == targets
    assert "output: reports/report.html" in out.split("rule render_report:", 1)[1]


def test_report_enabled_false_drops_the_job(tmp_path):
    off = tmp_path / "off.yaml"
    off.write_text("report:\n  enabled: false\n")
    out = _dry_run(tmp_path, "configs/test.yaml", str(off))
    assert "render_report" not in out
