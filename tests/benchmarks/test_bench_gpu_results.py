"""benchmarks/gpu_results.py turns the committed raw device outputs into result files that
carry the device, the commit measured and the headline figures."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gpu_results  # noqa: E402
import performance_table  # noqa: E402


def test_the_committed_device_outputs_become_table_rows(tmp_path):
    grid = json.loads(gpu_results.grid_result(gpu_results.GPU / "paper_a_grid.json", tmp_path)
                      .read_text())  # fmt: skip
    raw = json.loads((gpu_results.GPU / "paper_a_grid.json").read_text())
    assert grid["ours"]["median"] == round(raw["grid_hours"], 2)
    assert grid["machine"] == {"gpu": raw["device"]} and grid["settings"]["commit"] == raw["commit"]
    assert all(f"{name} " in grid["summary"] for name in raw["sweeps"])
    audit = json.loads(gpu_results.audit_result(gpu_results.GPU / "scale_audit.json", tmp_path)
                       .read_text())  # fmt: skip
    models = json.loads((gpu_results.GPU / "scale_audit.json").read_text())["models"]
    assert audit["ours"]["median"] == max(m["total_seconds"] for m in models.values())
    assert all(name in audit["summary"] for name in models)
    table = performance_table.render(performance_table.load(tmp_path))
    assert "1.63 GPU-hours" in table and "raw device output benchmarks/gpu/" in table


def test_the_committed_result_files_match_the_raw_outputs(tmp_path):
    """Rerunning the conversion reproduces the committed result files (raw and row agree)."""
    gpu_results.main(["--folder", str(tmp_path)])
    for name in ("paper_a_grid", "gpu_scale_audit"):
        fresh = json.loads((tmp_path / f"{name}.json").read_text())
        committed = json.loads((gpu_results.RESULTS / f"{name}.json").read_text())
        assert fresh == committed, name
