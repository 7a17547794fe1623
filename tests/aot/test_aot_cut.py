"""memcap.aot.cut: a job per setting trains that setting's seeds exactly as the sweep's job
does when settings train alone; padding, which puts settings in one model, is refused."""

import re
from pathlib import Path

import pytest
import torch
import yaml
from joined_tables import concat_tables
from snakemake.utils import validate

from memcap.aot.cut import check_cut, setting_pattern, sweep_settings
from memcap.aot.settings import StageSettings, expand_sweep
from memcap.aot.sweep import run_sweep
from memcap.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _config() -> dict:
    """configs/test_paper.yaml: paper B's recipes and models at tiny sizes, a job per setting."""
    config = yaml.safe_load((ROOT / "configs" / "test_paper.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    return config


def test_setting_ids_are_distinct_and_follow_the_sweeps_order():
    sweeps = _config()["aot"]["sweeps"]
    ids = sweep_settings("aot_vs_mlp", sweeps["aot_vs_mlp"])
    assert list(ids) == ["aot_H1", "aot_H3", "mlp_w0", "mlp_w16"]  # an MLP's width: its H
    assert list(ids.values()) == list(
        dict.fromkeys(expand_sweep("aot_vs_mlp", sweeps["aot_vs_mlp"]))
    )
    assert list(sweep_settings("distribution", sweeps["distribution"])) == ["aot_H1", "aot_H2"]
    assert all(re.fullmatch(setting_pattern(), s) for s in [*ids, "aot_N10_d4_dh2_H31"])


@pytest.mark.parametrize("sweep", ["aot_vs_mlp", "distribution"])
def test_settings_trained_apart_give_the_sweeps_table_byte_for_byte(sweep, tmp_path):
    config = _config()
    stage = StageSettings.from_config(config["aot"], config["seed"], config["engine"])
    spec, device = config["aot"]["sweeps"][sweep], torch.device("cpu")
    run_sweep(sweep, spec, stage, device).table.to_csv(tmp_path / "sweep.csv", index=False)
    parts = []
    for setting_id, setting in sweep_settings(sweep, spec).items():
        parts.append(tmp_path / f"{setting_id}.csv")
        run_sweep(sweep, spec, stage, device, setting).table.to_csv(parts[-1], index=False)
    rows = concat_tables(parts, tmp_path / "merged.csv")
    assert rows == len(parts) * config["aot"]["seeds"]
    assert (tmp_path / "merged.csv").read_bytes() == (tmp_path / "sweep.csv").read_bytes()


def test_the_setting_cut_refuses_padded_settings():
    config = _config()
    check_cut(config)
    config["engine"]["aot"]["pad_replicas"] = True
    with pytest.raises(ConfigError, match="engine.aot.pad_replicas"):
        check_cut(config)
    config["aot"]["cut"] = "sweep"
    check_cut(config)  # a job per sweep trains the padding it is given
