"""Test helper: a TrainConfig with the schema's defaults (the only place defaults live)."""

from pathlib import Path

import yaml

from memcap.training.config import TrainConfig

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def schema_train_defaults() -> dict:
    """The defaults of ``synthetic.train`` in the config schema."""
    schema = yaml.safe_load(SCHEMA.read_text())
    keys = schema["$defs"]["synthetic"]["properties"]["train"]["properties"]
    return {key: spec["default"] for key, spec in keys.items()}


def train_config(**overrides) -> TrainConfig:
    """A :class:`TrainConfig` of the schema's defaults with ``overrides``."""
    return TrainConfig(**{**schema_train_defaults(), **overrides})
