# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: both assumption checks of every layer of one model, and its depth
profile, into the job's temporary folder (one subfolder per layer, `depth/`)."""

import json
from pathlib import Path

import numpy as np

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.assumptions import depth, figures  # noqa: E402
from memcap.assumptions.checks import check_layer  # noqa: E402
from memcap.assumptions.null_table import null_source  # noqa: E402
from memcap.assumptions.settings import AssumptionsSettings  # noqa: E402
from memcap.devices import peak_memory_gb, reset_peak_memory, resolve_device  # noqa: E402
from memcap.numerics import load_context_ranks  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402
from memcap.provenance import array_checksum, write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
model, params, inputs = snakemake.wildcards.model, snakemake.params, snakemake.input
settings = AssumptionsSettings.from_config(params.settings)
device = resolve_device(params.device)
reset_peak_memory(device)
root = Path(snakemake.output.checks)
root.mkdir(parents=True)  # every layer's files, and the depth profile, go below
null = null_source(params.null_table)
contexts = dict(zip(params.detail_layers, inputs.contexts, strict=True))

rows, depth_profiles = [], {}
for layer, queries_path, ranks_path, provenance_path in zip(
    params.layers, inputs.queries, inputs.context_ranks, inputs.provenance, strict=True
):
    detail = layer in params.detail_layers
    extraction = json.loads(Path(provenance_path).read_text())
    queries = np.load(queries_path)
    ranks = load_context_ranks(ranks_path)
    log.info("layer %s: queries %s, %d contexts", layer, queries.shape, len(ranks.rank))
    samples = settings.samples if detail else settings.depth_samples
    checks = check_layer(
        queries,
        ranks,
        int(extraction["n"]),
        settings,
        samples,
        device,
        snakemake.threads,
        extraction=extraction,
        layer=layer,
        null=null,
        contexts=np.load(contexts[layer], mmap_mode="r") if detail else None,
    )
    log.info("layer %s: context ranks %s", layer, json.dumps(checks.context))
    log.info(
        "layer %s: P(n) = %s (%s), Kruskal rank ≈ %s; contexts %s; applies to %s examples",
        layer,
        checks.kruskal["p_n"],
        checks.kruskal["outcome_n"],
        checks.kruskal["estimate"],
        checks.context["outcome"],
        checks.kruskal["applies_examples"],
    )
    rows.append(
        depth.depth_row(
            model, layer, "detail" if detail else "depth", checks.context, checks.kruskal
        )
    )
    if not detail:
        depth_profiles[layer] = checks.profile_table
        continue
    out = root / layer
    out.mkdir()
    title = f"{model} · layer {layer}"
    common = {
        "stage": "assumptions",
        "model": model,
        "layer": layer,
        "settings": params.settings,
        "extraction": extraction,
    }
    checks.context_table.to_csv(out / "context_rank.csv", index=False)
    checks.failures.to_csv(out / "failures.csv", index=False)
    write_provenance(
        out / "context_rank.json",
        check="context_rank",
        **common,
        **checks.context,
        inputs=[ranks_path],
    )
    save_figure(
        figures.plot_context_ranks(checks.context_table, ranks.n, title), out / "context_rank.png"
    )
    checks.profile_table.to_csv(out / "kruskal_profile.csv", index=False)
    write_provenance(
        out / "kruskal.json",
        check="kruskal_profile",
        **common,
        **checks.kruskal,
        queries_checksum=array_checksum([queries]),
        inputs=[queries_path],
    )
    figure = figures.plot_profile(
        checks.profile_table, checks.kruskal["n"], checks.kruskal["d"], title
    )
    save_figure(figure, out / "kruskal_profile.png")

if params.depth_profile:
    out = root / "depth"
    out.mkdir()
    table = depth.depth_table(rows)
    table.to_csv(out / "depth.csv", index=False)
    depth.profiles_table(depth_profiles).to_csv(out / "depth_profiles.csv", index=False)
    log.info("depth profile:\n%s", table[list(depth.DEPTH_COLUMNS)].to_string())
    save_figure(figures.plot_depth(table, f"{model} · depth profile"), out / "depth.png")
log.info("peak GPU memory: %s GB", peak_memory_gb(device))  # None off CUDA; read by the scale audit
