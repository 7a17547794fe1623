"""The reading path from a sweep's entry to its first optimizer step, measured.

Runs the first sweep of paper A (``synthetic``) or paper B (``aot``) in ``config.yaml``
through its ``run_sweep`` under ``sys.setprofile`` and stops at the first ``FusedAdam.step``.
It prints the memcap files whose code ran on the way (the Snakemake script that calls
``run_sweep`` is one more file) and the returns as a reader who follows each call counts them:
every call site in one memcap module whose call into another module came back before the step,
once however often it ran.

    .venv/bin/python tests/helpers/step_path.py synthetic
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import yaml
from snakemake.utils import validate

from memcap.training.step import FusedAdam

ROOT = Path(__file__).resolve().parents[2]


class FirstStep(Exception):
    """Raised by the first optimizer step: the path ends there."""


class PathTracer:
    """Memcap files entered and cross-module returns (a ``sys.setprofile`` function)."""

    def __init__(self) -> None:
        self.files: Counter[str] = Counter()
        self.returns: set[tuple[str, int, str, str]] = set()  # call sites that came back
        self.stack: list[tuple[str, int]] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        path = frame.f_code.co_filename
        if (
            event not in ("call", "return")
            or "/memcap/" not in path
            or frame.f_code.co_name == "<module>"
        ):
            return
        module = "memcap/" + path.split("/memcap/", 1)[1]
        if event == "call":
            self.files[module] += 1
            caller = frame.f_back
            self.stack.append((module, caller.f_lineno if caller is not None else 0))
        elif self.stack:
            _, line = self.stack.pop()
            if self.stack and self.stack[-1][0] != module:
                self.returns.add((self.stack[-1][0], line, module, frame.f_code.co_name))


def _prepared(paper: str) -> Callable[[], object]:
    """The call of ``run_sweep`` on the paper's first sweep, its modules imported."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))  # fills the defaults
    device = torch.device("cpu")
    if paper == "synthetic":
        from memcap.synthetic.cut import job_spec
        from memcap.synthetic.settings import StageSettings
        from memcap.synthetic.sweep import run_sweep

        section = config["synthetic"]
        stage = StageSettings.from_config(section, config["seed"], config["engine"])
        spec = job_spec(section, next(iter(section["sweeps"])))
        return lambda: run_sweep(spec, stage, device)
    else:
        from memcap.aot.settings import StageSettings
        from memcap.aot.sweep import run_sweep

        section = config["aot"]
        stage = StageSettings.from_config(section, config["seed"], config["engine"])
        name, spec = next(iter(section["sweeps"].items()))
        return lambda: run_sweep(name, spec, stage, device)


def measure(paper: str) -> PathTracer:
    """The path of ``paper``'s first sweep to its first optimizer step (Adam restored after)."""

    def first_step(self: FusedAdam, lr: float | torch.Tensor) -> None:
        raise FirstStep

    run = _prepared(paper)
    tracer = PathTracer()
    adam_step = FusedAdam.step
    FusedAdam.step = first_step  # type: ignore[method-assign]
    sys.setprofile(tracer)
    try:
        run()
    except FirstStep:
        pass
    finally:
        sys.setprofile(None)
        FusedAdam.step = adam_step  # type: ignore[method-assign]
    return tracer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=["synthetic", "aot"])
    tracer = measure(parser.parse_args().paper)
    for name, calls in sorted(tracer.files.items()):
        print(f"{calls:8d}  {name}")
    print(f"FILES {len(tracer.files)} (+ the script)  RETURNS {len(tracer.returns)}")


if __name__ == "__main__":
    main()
