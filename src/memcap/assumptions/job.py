"""Both checks of every layer of one model, written into the model's folder.

Per detail layer, ``{layer}/``: context_rank.csv, context_rank.json, context_rank.png,
kruskal_profile.csv, kruskal.json, kruskal_profile.png and failures.csv. Depth rows are
checked with ``depth_samples`` orderings and keep only their row of the depth profile, which a
model with one writes beside its layers: depth.csv, depth_profiles.csv and depth.png.

:func:`check_model` checks every layer in one job (``assumptions.cut: model``);
:func:`check_one` checks one layer into a folder of its own, with its depth row and profile
in :data:`DEPTH_PART`, and :func:`merge_layers` writes the model's folder from those
(``assumptions.cut: layer``): the same files, through the same writers.
"""

from __future__ import annotations

import json
import logging
import pickle
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions import depth, figures
from memcap.assumptions.checks import LayerChecks, check_layer
from memcap.assumptions.settings import AssumptionsSettings
from memcap.extract.store import ExtractOutputs
from memcap.numerics import load_context_ranks
from memcap.numerics.band import NullSource
from memcap.plotting import save_figure
from memcap.provenance import array_checksum, write_provenance

_logger = logging.getLogger(__name__)
# A layer job's depth row and profile, for the merge (pickled: the same values, exactly).
DEPTH_PART = "depth_part.pkl"


def check_model(
    model: str,
    extraction: str | Path,
    out: str | Path,
    layers: Sequence[str],
    detail_layers: Sequence[str],
    section: Mapping[str, Any],
    depth_profile: bool,
    device: Any,
    workers: int = 1,
    null: NullSource | None = None,
) -> None:
    """Check ``layers`` of ``model`` from its extraction folder into ``out``.

    Args:
        extraction: the model's extraction folder (results/extract/{model}/).
        out: the model's assumptions folder (results/assumptions/{model}/), created here.
        layers: every layer to check, detail layers and depth rows, in depth order.
        detail_layers: the layers checked in full (their contexts are stored).
        section: the validated ``assumptions`` config section, recorded with every summary.
        depth_profile: whether to write the depth profile of every checked layer.
        null: where the random null comes from (:func:`memcap.assumptions.null_table.null_source`).
    """
    out = Path(out)
    out.mkdir(parents=True)
    parts = [
        _check(model, extraction, out / layer, layer, layer in detail_layers, section, device,
               workers, null)
        for layer in layers
    ]  # fmt: skip
    if depth_profile:
        _write_parts(out, model, parts)


def check_one(
    model: str,
    extraction: str | Path,
    out: str | Path,
    layer: str,
    detail: bool,
    section: Mapping[str, Any],
    device: Any,
    workers: int = 1,
    null: NullSource | None = None,
) -> None:
    """Check one ``layer`` of ``model`` into the folder ``out``, created here: a detail
    layer's files, and the layer's depth row and profile (:data:`DEPTH_PART`)."""
    out = Path(out)
    out.mkdir(parents=True)
    part = _check(model, extraction, out, layer, detail, section, device, workers, null)
    with (out / DEPTH_PART).open("wb") as file:
        pickle.dump(part, file)


def merge_layers(
    model: str, folders: Mapping[str, str | Path], out: str | Path, depth_profile: bool
) -> None:
    """The model's folder ``out`` from its layers' folders (``folders``: layer -> folder of
    :func:`check_one`, in depth order): each detail layer's files, and the depth profile."""
    out = Path(out)
    out.mkdir(parents=True)
    parts = []
    for layer, folder in folders.items():
        with (Path(folder) / DEPTH_PART).open("rb") as file:
            parts.append(pickle.load(file))
        if parts[-1]["profile"] is None:  # a detail layer: its files, as check_model writes
            shutil.copytree(folder, out / layer, ignore=shutil.ignore_patterns(DEPTH_PART))
    if depth_profile:
        _write_parts(out, model, parts)


def _check(
    model: str,
    extraction: str | Path,
    out: Path,
    layer: str,
    detail: bool,
    section: Mapping[str, Any],
    device: Any,
    workers: int,
    null: NullSource | None,
) -> dict[str, Any]:
    """Both checks of one layer; a detail layer's files into ``out``. Its depth row, and its
    profile table where it is a depth row (None for a detail layer)."""
    settings = AssumptionsSettings.from_config(section)
    files = ExtractOutputs.in_folder(extraction, layer, contexts=detail)
    extraction_record = json.loads(files.provenance.read_text())
    queries = np.load(files.queries)
    ranks = load_context_ranks(files.context_ranks)
    _logger.info("layer %s: queries %s, %d contexts", layer, queries.shape, len(ranks.rank))
    checks = check_layer(
        queries,
        ranks,
        int(extraction_record["n"]),
        settings,
        settings.samples if detail else settings.depth_samples,
        device,
        workers,
        extraction=extraction_record,
        layer=layer,
        null=null,
        contexts=np.load(files.contexts, mmap_mode="r") if detail else None,
    )
    _log_checks(layer, checks)
    role = "detail" if detail else "depth"
    row = depth.depth_row(model, layer, role, checks.context, checks.kruskal)
    if not detail:
        return {"layer": layer, "row": row, "profile": checks.profile_table}
    common = {
        "stage": "assumptions",
        "model": model,
        "layer": layer,
        "settings": section,
        "extraction": extraction_record,
    }
    _write_layer(out, checks, queries, ranks.n, files, common)
    return {"layer": layer, "row": row, "profile": None}


def _write_parts(out: Path, model: str, parts: Sequence[Mapping[str, Any]]) -> None:
    """The depth profile of the checked layers ``parts`` (in depth order)."""
    profiles = {p["layer"]: p["profile"] for p in parts if p["profile"] is not None}
    _write_depth(out, model, depth.depth_table([p["row"] for p in parts]), profiles)


def _log_checks(layer: str, checks: LayerChecks) -> None:
    _logger.info("layer %s: context ranks %s", layer, json.dumps(checks.context))
    _logger.info(
        "layer %s: P(n) = %s (%s), Kruskal rank ≈ %s; contexts %s; applies to %s examples",
        layer,
        checks.kruskal["p_n"],
        checks.kruskal["outcome_n"],
        checks.kruskal["estimate"],
        checks.context["outcome"],
        checks.kruskal["applies_examples"],
    )


def _write_layer(
    out: Path,
    checks: LayerChecks,
    queries: np.ndarray,
    n: int,
    files: ExtractOutputs,
    common: Mapping[str, Any],
) -> None:
    """A detail layer's tables, summaries and figures (``n``: the contexts' size)."""
    out.mkdir(exist_ok=True)
    title = f"{common['model']} · layer {common['layer']}"
    checks.context_table.to_csv(out / "context_rank.csv", index=False)
    checks.failures.to_csv(out / "failures.csv", index=False)
    write_provenance(
        out / "context_rank.json",
        check="context_rank",
        **common,
        **checks.context,
        inputs=[str(files.context_ranks)],
    )
    save_figure(
        figures.plot_context_ranks(checks.context_table, n, title), out / "context_rank.png"
    )
    checks.profile_table.to_csv(out / "kruskal_profile.csv", index=False)
    write_provenance(
        out / "kruskal.json",
        check="kruskal_profile",
        **common,
        **checks.kruskal,
        queries_checksum=array_checksum([queries]),
        inputs=[str(files.queries)],
    )
    kruskal = checks.kruskal
    figure = figures.plot_profile(checks.profile_table, kruskal["n"], kruskal["d"], title)
    save_figure(figure, out / "kruskal_profile.png")


def _write_depth(
    out: Path, model: str, table: pd.DataFrame, profiles: Mapping[str, pd.DataFrame]
) -> None:
    """The depth profile: its table, the depth rows' P(k) profiles and its figure."""
    table.to_csv(out / "depth.csv", index=False)
    depth.profiles_table(profiles).to_csv(out / "depth_profiles.csv", index=False)
    _logger.info("depth profile:\n%s", table[list(depth.DEPTH_COLUMNS)].to_string())
    save_figure(figures.plot_depth(table, f"{model} · depth profile"), out / "depth.png")
