"""The environment the README builds: imports work, pins agree across pyproject and envs/."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GROUPS = ("extract", "compute", "report")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for line in requirements:
        name, sep, version = line.partition("==")
        assert sep, f"'{line}' is not pinned with =="
        pins[name.strip().lower()] = version.strip()
    return pins


def test_timm_imports_with_torchvision_in_this_environment():
    # A fresh interpreter, so an import cached by another test cannot hide a broken install.
    code = "import timm, torch, torchvision; timm.create_model('vit_tiny_patch16_224'); print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_torch_and_torchvision_are_the_pinned_pair():
    import torch
    import torchvision

    assert torch.__version__.split("+")[0] == "2.13.0"
    assert torchvision.__version__.split("+")[0] == "0.28.0"


def test_every_dependency_is_pinned():
    project = _pyproject()["project"]
    _pins(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        _pins(extra)
    _pins(_pyproject()["dependency-groups"]["dev"])


@pytest.mark.parametrize("group", GROUPS)
def test_conda_env_agrees_with_pyproject(group):
    project = _pyproject()["project"]
    expected = _pins(project["dependencies"]) | _pins(project["optional-dependencies"][group])
    env = yaml.safe_load((ROOT / "envs" / f"{group}.yaml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = _pins([p for p in pip_section if not p.startswith("-e")])
    assert listed == expected
    assert "python=3.11" in env["dependencies"]
    assert any(p.startswith("-e ..") for p in pip_section), "memcap itself must be installed"


def test_every_rule_env_exists():
    for smk in (ROOT / "rules").glob("*.smk"):
        for line in smk.read_text().splitlines():
            if line.strip().startswith("conda:"):
                env = line.split(":", 1)[1].strip().strip("\"'")
                assert (ROOT / "rules" / env).resolve().exists(), f"{smk.name}: {env}"


def test_lock_file_is_current():
    uv = os.environ.get("UV") or shutil.which("uv")  # `uv run` exports UV
    if uv is None:
        pytest.skip("uv not found: run the suite through `make test` (uv run)")
    result = subprocess.run([uv, "lock", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
