"""benchmarks/compare_results.py: equal results pass, any changed value or missing file fails."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_results.py"
_spec = importlib.util.spec_from_file_location("compare_results", SCRIPT)
compare_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_results)


def _write(root: Path, value: float, seconds: float, folder: str = "synthetic") -> None:
    (root / folder).mkdir(parents=True)
    table = pd.DataFrame({"H": [1, 2], "r2": [value, np.nan], "wall_seconds": [seconds, 1.0]})
    table.to_csv(root / folder / "fits.csv", index=False)
    np.save(root / folder / "z.npy", np.array([value, np.nan]))


def test_equal_results_pass_and_timing_columns_are_ignored(tmp_path, capsys):
    _write(tmp_path / "a", 0.5, seconds=3.0)
    _write(tmp_path / "b", 0.5, seconds=9.0)
    assert compare_results.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "2 files compared: identical" in capsys.readouterr().out


def test_a_changed_value_fails_and_is_listed(tmp_path, capsys):
    _write(tmp_path / "a", 0.5, seconds=3.0)
    _write(tmp_path / "b", 0.5 + 1e-15, seconds=3.0)
    assert compare_results.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "synthetic/fits.csv: column r2: 1 rows differ" in out
    assert "synthetic/z.npy: 1 of 2 entries differ" in out


def test_moved_files_are_found_through_the_mapping(tmp_path):
    _write(tmp_path / "a", 0.5, seconds=3.0, folder="synthetic")
    _write(tmp_path / "b", 0.5, seconds=3.0, folder="capacity")
    args = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert compare_results.main(args) == 1  # missing under the old path
    assert compare_results.main([*args, "--map", "synthetic=capacity"]) == 0
