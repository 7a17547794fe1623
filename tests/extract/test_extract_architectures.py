"""Every extract.models entry's architecture is resolved before any job: one the extraction
does not read stops the dry run in one line (key, class, why). Refused only where Theorem 1 has
no object (no attention, state-space models) or the config cannot be read; encoder-decoders'
encoders and Swin pass. Local save_pretrained directories of tiny configs; no network."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from config_edits import dry_run

from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test resolves in its own cache directory (the user's is left alone)."""
    monkeypatch.setenv("MEMCAP_CACHE_DIR", str(tmp_path / "cache"))


def _saved(tmp_path: Path, name: str) -> str:
    """A save_pretrained directory of a tiny transformers config (config.json only)."""
    import transformers

    configs = {
        "t5": transformers.T5Config(
            d_model=16, d_ff=32, d_kv=8, num_layers=2, num_heads=2, vocab_size=300
        ),
        "bart": transformers.BartConfig(
            d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=300,
            max_position_embeddings=64,
        ),
        "swin": transformers.SwinConfig(
            image_size=32, patch_size=4, embed_dim=8, depths=[1, 1], num_heads=[1, 1], window_size=2
        ),
        "convnext": transformers.ConvNextConfig(
            num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], image_size=32
        ),
        "mamba": transformers.MambaConfig(
            hidden_size=16, num_hidden_layers=2, vocab_size=300, state_size=4
        ),
        "bert": transformers.BertConfig(
            hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
        ),
        "vit": transformers.ViTConfig(
            hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            image_size=32, patch_size=8,
        ),
    }  # fmt: skip
    directory = tmp_path / name
    configs[name].save_pretrained(directory)
    return str(directory)


def _config(family: str, model: str) -> dict:
    entry = {"name": "m", "family": family, "model": model, "weights": "random", "layers": [0]}
    if family == "vit":
        entry["data"] = {"T": 8}
    else:
        entry.update(tokenizer="byte-bpe", data={"source": "pydocs", "T": 8})
    return {"extract": {"models": [entry]}}


@pytest.mark.parametrize(
    ("family", "name", "cls", "problem", "fix"),
    [
        ("vit", "convnext", "ConvNextConfig", "has no attention layer", "attention model"),
        (
            "decoder",
            "mamba",
            "MambaConfig",
            "is a state-space / recurrent model (Mamba)",
            "attention model",
        ),
        ("decoder", "t5", "T5Config", "is an encoder-decoder model", "family: encoder"),
        ("encoder", "vit", "ViTConfig", "states no number of positions", "encoder-only"),
    ],
)
def test_an_architecture_the_extraction_does_not_read_is_named_with_why(
    tmp_path, family, name, cls, problem, fix
):
    model = _saved(tmp_path, name)
    with pytest.raises(ConfigError) as info:
        check_extract_config(_config(family, model))
    message = str(info.value)
    assert info.value.key == "extract.models[0].model"
    assert f"'{model}' ({cls}) {problem}" in message and fix in info.value.fix
    assert "\n" not in message
    if family != "encoder" and name != "t5":  # where Theorem 1 has no object, it says so
        assert "Theorem 1, about an attention layer reading a context of n tokens" in message


@pytest.mark.parametrize(
    ("model", "cls"), [("convnext_atto", "ConvNeXt"), ("mixer_s16_224", "MlpMixer")]
)
def test_a_timm_model_without_attention_is_refused(model, cls):
    with pytest.raises(ConfigError) as info:
        check_extract_config(_config("vit", model))
    assert info.value.key == "extract.models[0].model"
    assert f"'{model}' (timm {cls}) has no attention layer" in str(info.value)
    assert "has no object" in str(info.value)


def test_a_config_class_of_a_state_space_model_is_refused():
    config = _config("decoder", "MambaConfig")
    config["extract"]["models"][0]["model_kwargs"] = {"hidden_size": 16, "num_hidden_layers": 2}
    with pytest.raises(
        ConfigError, match=r"'MambaConfig' \(MambaConfig\) is a state-space / recurrent model"
    ):
        check_extract_config(config)


def test_readable_architectures_pass(tmp_path):
    readable = [("encoder", "bert"), ("vit", "vit"), ("encoder", "t5"), ("encoder", "bart")]
    for family, name in [*readable, ("vit", "swin")]:
        check_extract_config(_config(family, _saved(tmp_path, name)))
    check_extract_config(_config("vit", "vit_base_patch16_224"))
    check_extract_config(_config("vit", "swin_tiny_patch4_window7_224"))
    check_extract_config(_config("decoder", "GPT2Config"))
    for config_class in ("T5Config", "BartConfig", "MBartConfig"):
        check_extract_config(_config("encoder", config_class))


def test_n_of_a_windowed_model_is_refused_naming_the_key(tmp_path):
    config = _config("vit", _saved(tmp_path, "swin"))
    config["extract"]["models"][0]["n"] = 4
    with pytest.raises(ConfigError) as info:
        check_extract_config(config)
    assert info.value.key == "extract.models[0].n"
    assert "attends within windows" in str(info.value) and "n = 4 at layer 0" in str(info.value)


def _resolve_in_a_new_process(config: dict, tmp_path: Path) -> str:
    """Run the check in a fresh interpreter; which model libraries it imported."""
    path = tmp_path / "entry.yaml"
    path.write_text(yaml.safe_dump(config))
    code = (
        "import sys, yaml\n"
        "from memcap.extract.checks import check_extract_config\n"
        f"check_extract_config(yaml.safe_load(open({str(path)!r})))\n"
        "print(sorted(m for m in ('torch', 'timm', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return result.stdout.strip()


def test_a_repeated_check_reads_the_cache_and_a_changed_file_resolves_anew(tmp_path):
    model = _saved(tmp_path, "bert")
    config = _config("encoder", model)
    assert "transformers" in _resolve_in_a_new_process(config, tmp_path)
    assert _resolve_in_a_new_process(config, tmp_path) == "[]"  # no library imported
    config_json = Path(model) / "config.json"
    config_json.write_text(
        config_json.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3')
    )
    assert "transformers" in _resolve_in_a_new_process(config, tmp_path)


def test_the_dry_run_stops_before_any_job_in_one_line(tmp_path):
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["extract"]["models"][2]["model"] = _saved(tmp_path, "mamba")
    config["extract"]["models"][2]["model_kwargs"] = {}
    result, output = dry_run(config, tmp_path)
    assert result.returncode != 0
    lines = [line for line in output.splitlines() if "config key" in line]
    assert len(lines) == 1 and "'extract.models[2].model'" in lines[0]
    assert "MambaConfig" in lines[0] and "is a state-space / recurrent model (Mamba)" in lines[0]
