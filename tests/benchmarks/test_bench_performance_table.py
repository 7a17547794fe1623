"""benchmarks/performance_table.py renders docs/performance.md's table from result files, and
benchmarks/_results.record writes them."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _results  # noqa: E402
import performance_table  # noqa: E402

PAGE = """# Performance

Text before.

<!-- benchmarks:begin -->
| old | table |
|---|---|
| stale | row |
<!-- benchmarks:end -->

Text after, with a | pipe.
"""


def _result(name: str, ratio: float | None, **fields) -> dict:
    return {
        "benchmark": name,
        "compares": f"{name}'s way vs the naive way",
        "ratio": ratio,
        "ratio_is": "naive / ours",
        "other_ratios": {},
        "ours": {"label": "ours", "median": 1.5, "unit": "s"},
        "baseline": {"label": "naive", "median": 3.0, "unit": "s"},
        "summary": None,
        "repeats": 3,
        "machine": {"cpus_usable": 2, "matmul_gflops_1thread": 101.2, "torch": "2.0"},
        "date": "2000-01-01T00:00:00+00:00",
        "source": "measured",
        **fields,
    }


def test_the_table_is_rendered_from_the_files_between_the_markers_only(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "bench_layers.json").write_text(json.dumps(_result("bench_layers", 2.0)))
    converted = _result("bench_zeta", None, summary="no verdict changes", source="copied")
    (results / "bench_zeta.json").write_text(json.dumps(converted))
    (results / "extract_model").mkdir()  # Snakemake's benchmark: folders are not result files
    page = tmp_path / "performance.md"
    page.write_text(PAGE)

    argv = ["--results", str(results), "--page", str(page)]
    assert performance_table.main([*argv, "--check"]) == 1
    assert performance_table.main(argv) == 0
    text = page.read_text()

    before, rest = text.split("<!-- benchmarks:begin -->\n")
    table, after = rest.split("<!-- benchmarks:end -->")
    assert before == PAGE.split("<!-- benchmarks:begin -->")[0]
    assert after == PAGE.split("<!-- benchmarks:end -->")[1]
    assert "stale" not in table
    lines = table.strip().splitlines()
    assert lines[0].startswith("| script | what it compares | ratio |")
    rows = [line for line in lines[2:] if line.startswith("| `")]
    assert [row.split("|")[1].strip() for row in rows] == ["`bench_layers.py`", "`bench_zeta.py`"]
    assert "**2** = naive / ours" in rows[0] and "ours: 1.5 s" in rows[0]
    assert "naive: 3 s" in rows[0] and "matmul 101 GFLOP/s" in rows[0]
    assert "[extract.md](extract.md)" in rows[0]
    assert "no verdict changes" in rows[1] and rows[1].count("†") == 1
    assert lines[-1] == "† copied."
    assert performance_table.main([*argv, "--check"]) == 0  # idempotent
    assert performance_table.main(argv) == 0 and page.read_text() == text


def test_a_page_without_the_markers_is_refused(tmp_path):
    with pytest.raises(ValueError, match="benchmarks:begin"):
        performance_table.replace_table("no markers here", "| table |")


def test_record_writes_a_result_file_the_table_reads(tmp_path, monkeypatch):
    monkeypatch.setenv(_results.ENV, str(tmp_path))
    path = _results.record(
        "/somewhere/bench_demo.py",
        "ours vs naive",
        2.5,
        ("ours", 0.4, "s"),
        ("naive", 1.0, "s"),
        ratio_is="naive / ours",
        repeats=3,
        settings={"threads": 1, "queries": Path("q.npy")},
        other_ratios={"cpu": 2.0},
        gflops=False,
    )
    assert path == tmp_path / "bench_demo.json"
    result = json.loads(path.read_text())
    assert result["benchmark"] == "bench_demo" and result["ratio"] == 2.5
    assert result["ours"] == {"label": "ours", "median": 0.4, "unit": "s"}
    assert result["baseline"]["median"] == 1.0 and result["repeats"] == 3
    assert result["settings"] == {"threads": 1, "queries": "q.npy"}
    assert result["source"] == "measured" and result["date"]
    machine = result["machine"]
    assert machine["cpu_count"] >= 1 and machine["torch"] and machine["platform"]
    assert machine["matmul_gflops_1thread"] is None  # gflops=False
    table = performance_table.render(performance_table.load(tmp_path))
    assert "`bench_demo.py`" in table and "**2.5**" in table


def test_record_measures_the_matmul_rate_and_keeps_the_thread_count(tmp_path):
    import torch

    threads = torch.get_num_threads()
    path = _results.record(
        "bench_demo", "x vs y", 1.0, ("x", 1, "s"), ("y", 1, "s"), ratio_is="y / x", repeats=1,
        folder=tmp_path,
    )  # fmt: skip
    assert json.loads(path.read_text())["machine"]["matmul_gflops_1thread"] > 0
    assert torch.get_num_threads() == threads


def test_the_committed_table_matches_the_committed_result_files():
    assert performance_table.main(["--check"]) == 0
