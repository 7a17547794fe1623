"""How the assumption checks are cut into jobs (``assumptions.cut``): a job per model, or per
(model, layer).

A job's id is the one {job} wildcard of rule check_assumptions: the model ("gpt2-small") or
the model and one of its layers ("gpt2-small/3"). Its folder is
``results/assumptions/jobs/{job}/``, so a layer's folder is ``jobs/{model}/{layer}/`` under
either cut: the model's job writes it inside its own, the layer's job is it
(:func:`layer_folders`). Both checks of a layer derive their seeds from the configured seed and
the layer, never from the job, so both cuts write the same files.

No torch import here: the Snakefile imports this module to name the jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

CUTS = ("model", "layer")
# A layer's name: a block number or a named variant (memcap.extract.layer_spec.layer_name).
LAYER_PATTERN = "[0-9]+|[A-Za-z_]+"


def job_ids(cut: str, layers: Mapping[str, Sequence[str]]) -> list[str]:
    """The check jobs of ``cut``, in order: each model of ``layers`` (model -> its checked
    layers, in config order), or each of its layers ("gpt2-small/3")."""
    if cut == "model":
        return list(layers)
    return [f"{model}/{layer}" for model, checked in layers.items() for layer in checked]


def job_pattern(model_pattern: str) -> str:
    """Regex of the {job} wildcard under either cut: a model (``model_pattern``: the
    configured names), then maybe one of its layers."""
    return f"({model_pattern})(/({LAYER_PATTERN}))?"


def parse_job(job: str) -> tuple[str, str | None]:
    """(model, layer) of the job ``job``; layer None for a model's job."""
    model, _, layer = job.partition("/")
    return model, layer or None


def job_layers(job: str, layers: Sequence[str]) -> list[str]:
    """The layers the job checks, of its model's checked ``layers``: every one, or its own."""
    _, layer = parse_job(job)
    return list(layers) if layer is None else [layer]


def layer_folders(job: str, folder: str | Path, layers: Sequence[str]) -> dict[str, Path]:
    """Each checked layer's folder, by layer, for the job ``job`` whose folder is ``folder``:
    ``{layer}/`` inside a model's job, the folder itself for a layer's job."""
    folder = Path(folder)
    if parse_job(job)[1] is not None:
        return {layer: folder for layer in job_layers(job, layers)}
    return {layer: folder / layer for layer in layers}
