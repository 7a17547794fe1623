"""Both checks of every layer of one model, written into the model's folder.

Per detail layer, ``{layer}/``: context_rank.csv, context_rank.json, context_rank.png,
kruskal_profile.csv, kruskal.json, kruskal_profile.png and failures.csv. Depth rows are
checked with ``depth_samples`` orderings and keep only their row of the depth profile, which a
model with one writes beside its layers: depth.csv, depth_profiles.csv and depth.png.
"""

from __future__ import annotations

import json
import logging
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
    settings = AssumptionsSettings.from_config(section)
    out = Path(out)
    out.mkdir(parents=True)
    rows, profiles = [], {}
    for layer in layers:
        detail = layer in detail_layers
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
        rows.append(depth.depth_row(model, layer, role, checks.context, checks.kruskal))
        if detail:
            common = {
                "stage": "assumptions",
                "model": model,
                "layer": layer,
                "settings": section,
                "extraction": extraction_record,
            }
            _write_layer(out / layer, checks, queries, ranks.n, files, common)
        else:
            profiles[layer] = checks.profile_table
    if depth_profile:
        _write_depth(out, model, depth.depth_table(rows), profiles)


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
    out.mkdir()
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
