"""Both checks of a check job's layers, each into its layer's folder, and a model's depth
profile from its layers' folders.

Per detail layer, its folder holds context_rank.csv, context_rank.json, context_rank.png,
kruskal_profile.csv, kruskal.json, kruskal_profile.png and failures.csv. Every checked layer's
folder holds its depth row and P(k) profile (:data:`DEPTH_PART`): depth rows are checked with
``depth_samples`` orderings and keep only those. :func:`check_layers` writes the folders of a
job's layers (:func:`memcap.assumptions.cut.layer_folders`: a model's job or a layer's, the
same files); :func:`write_depth_profile` writes a model's depth.csv, depth_profiles.csv and
depth.png from its layers' folders (the summary step, once every job is done).
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memcap.assumptions import depth, figures
from memcap.assumptions.checks import LayerChecks, check_layer
from memcap.assumptions.settings import AssumptionsSettings
from memcap.extract.store import ExtractOutputs
from memcap.numerics import load_context_ranks
from memcap.numerics.band import NullSource
from memcap.plotting import save_figure
from memcap.provenance import array_checksum, write_provenance

_logger = logging.getLogger(__name__)
# A layer's depth row and P(k) profile, for the depth profile (pickled: the same values, exactly).
DEPTH_PART = "depth_part.pkl"


def check_layers(
    model: str,
    extraction: str | Path,
    folders: Mapping[str, str | Path],
    detail_layers: Sequence[str],
    section: Mapping[str, Any],
    device: Any,
    workers: int = 1,
    null: NullSource | None = None,
) -> None:
    """Check the layers ``folders`` names (layer -> its folder, created here) of ``model``
    from its extraction folder: a detail layer's files, and every layer's :data:`DEPTH_PART`.

    Args:
        extraction: the model's extraction folder (results/extract/{model}/).
        folders: the job's layers, in depth order, and their folders.
        detail_layers: the model's layers checked in full (their contexts are stored).
        section: the validated ``assumptions`` config section, recorded with every summary.
        null: where the random null comes from (:func:`memcap.assumptions.null_table.null_source`).
    """
    for layer, folder in folders.items():
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        detail = layer in detail_layers
        part = _check(model, extraction, folder, layer, detail, section, device, workers, null)
        with (folder / DEPTH_PART).open("wb") as file:
            pickle.dump(part, file)


def read_parts(folders: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The depth parts of the layers whose folders are ``folders``, in their order."""
    parts = []
    for folder in folders:
        with (Path(folder) / DEPTH_PART).open("rb") as file:
            parts.append(pickle.load(file))
    return parts


def write_depth_profile(
    model: str,
    folders: Sequence[str | Path],
    table: str | Path,
    profiles: str | Path,
    figure: str | Path,
) -> None:
    """The depth profile of ``model`` from its checked layers' folders (in depth order): its
    table, the depth rows' P(k) profiles and its figure."""
    parts = read_parts(folders)
    rows = depth.depth_table([p["row"] for p in parts])
    Path(table).parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(table, index=False)
    shapes = {p["layer"]: p["profile"] for p in parts if p["profile"] is not None}
    depth.profiles_table(shapes).to_csv(profiles, index=False)
    _logger.info("%s depth profile:\n%s", model, rows[list(depth.DEPTH_COLUMNS)].to_string())
    save_figure(figures.plot_depth(rows, f"{model} · depth profile"), figure)


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
