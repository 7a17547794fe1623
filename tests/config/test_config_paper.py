"""configs/paper.yaml audits every model at the context length paper A tested its kind at."""

from pathlib import Path

import yaml

from memcap.extract.config import FAMILY_KINDS
from memcap.report.paper_a import paper_a_values

ROOT = Path(__file__).resolve().parents[2]


def test_paper_config_runs_text_models_at_paper_a_context_lengths():
    config = yaml.safe_load((ROOT / "configs" / "paper.yaml").read_text())
    kinds = paper_a_values()["kinds"]
    text = [m for m in config["extract"]["models"] if FAMILY_KINDS[m["family"]] != "vit"]
    assert text
    for model in text:
        assert model["n"] == kinds[FAMILY_KINDS[model["family"]]]["n"], model["name"]
    # vision models take every token: paper A's 197 for ViT-B/16 at 224 px
    assert all(
        "n" not in m for m in config["extract"]["models"] if FAMILY_KINDS[m["family"]] == "vit"
    )
