"""memcap.synthetic.cut: a job per setting trains that setting's replicas exactly as the sweep's
job does, under the grouping the setting cut requires; a grouping that mixes settings is
refused."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from joined_tables import concat_tables
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.synthetic.cut import (
    SETTING_GROUPING,
    check_cut,
    setting_ids,
    setting_pattern,
    setting_spec,
)
from memcap.synthetic.settings import StageSettings, replica_groups, sweep_spec
from memcap.synthetic.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[2]


def _config(group_by: list[str]) -> dict:
    """configs/test_paper.yaml (the authors' recipe, both contexts) with a tiny heads sweep
    grouped by ``group_by``, its ladder growing and the check on (the whole protocol)."""
    config = yaml.safe_load((ROOT / "configs" / "test_paper.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    config = copy.deepcopy(config)
    config["engine"]["synthetic"] |= {"group_by": group_by, "leave_when_fit": True}
    config["synthetic"]["ladder"] |= {"grow_at": 0.9, "max_T": 32, "restarts": 1}
    config["synthetic"]["sweeps"]["heads"] |= {"values": [1, 2], "T": [8, 16]}
    config["synthetic"]["authors"] |= {"steps": 150, "lr": 0.02}
    return config


def test_setting_ids_name_every_value_and_context_once():
    spec = sweep_spec(_config(list(SETTING_GROUPING))["synthetic"], "heads")
    ids = setting_ids(spec)
    assert ids == [f"H{v}_{c}" for v in (1, 2) for c in ("shared", "random")]
    for setting in ids:
        one = setting_spec(spec, setting)
        assert setting_ids(one) == [setting] and one.T == spec.T and one.name == spec.name
    assert sweep_spec(_config([])["synthetic"], "head_dim").name == "head_dim"
    assert setting_ids(sweep_spec(_config([])["synthetic"], "head_dim"))[0] == "dh1_shared"
    import re

    assert all(re.fullmatch(setting_pattern(), s) for s in ids + ["dh16_shared", "n5_random"])
    with pytest.raises(ValueError, match="no setting"):
        setting_spec(spec, "H9_shared")


def _tables(config: dict, tmp_path: Path) -> tuple[bytes, bytes]:
    """The heads sweep's table, and its settings' tables joined, as bytes (the sweep's also
    in tmp_path / "sweep.csv")."""
    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    spec = sweep_spec(section, "heads")
    run_sweep(spec, stage, torch.device("cpu")).table.to_csv(tmp_path / "sweep.csv", index=False)
    parts = []
    for setting in setting_ids(spec):
        part = tmp_path / f"{setting}.csv"
        run_sweep(setting_spec(spec, setting), stage, torch.device("cpu")).table.to_csv(
            part, index=False
        )
        parts.append(part)
    concat_tables(parts, tmp_path / "merged.csv")
    return (tmp_path / "sweep.csv").read_bytes(), (tmp_path / "merged.csv").read_bytes()


def test_settings_trained_apart_give_the_sweeps_table_byte_for_byte(tmp_path):
    """The whole protocol (ladder growth, restarts, the check, replicas leaving): one job per
    setting writes the sweep job's rows, to the byte."""
    sweep, merged = _tables(_config(list(SETTING_GROUPING)), tmp_path)
    assert sweep == merged
    table = pd.read_csv(tmp_path / "sweep.csv")
    assert table["grown"].any() and (table["budget"] > 0).any()  # grew, and the check ran


def test_grouping_by_T_mixes_the_settings_a_setting_job_trains_apart():
    """The default's grouping puts several settings in one batched model (what the setting
    cut cannot reproduce); the required one never does."""
    for group_by, mixed in (([], True), (["T"], True), (list(SETTING_GROUPING), False)):
        config = _config(group_by)
        section = config["synthetic"]
        stage = StageSettings.from_config(section, 0, config["engine"])
        groups = replica_groups(sweep_spec(section, "heads"), stage).values()
        settings = [{(r.setting.value, r.setting.context) for r in g} for g in groups]
        assert any(len(s) > 1 for s in settings) is mixed, group_by


@pytest.mark.parametrize("group_by", [[], ["T"], ["shape"], ["context", "T"]])
def test_the_setting_cut_refuses_a_grouping_that_mixes_settings(group_by):
    config = _config(group_by)
    with pytest.raises(ConfigError, match="engine.synthetic.group_by"):
        check_cut(config)
    config["synthetic"]["cut"] = "sweep"
    check_cut(config)  # a job per sweep trains the grouping it is given


def test_the_setting_cut_takes_the_per_setting_grouping():
    check_cut(_config(["shape", "context", "T"]))
