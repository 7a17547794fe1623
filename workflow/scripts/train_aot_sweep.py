# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: train every setting x seed of one AoT sweep."""

import time

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.aot.sweep import AotTrainSettings, run_sweep  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
sweep = snakemake.wildcards.sweep
spec = snakemake.params.spec
device = resolve_device(snakemake.params.device)
train = AotTrainSettings.from_config(snakemake.params.training, snakemake.params.seed)
start = time.perf_counter()
table, stats = run_sweep(sweep, spec, train, device)
wall = time.perf_counter() - start
table.to_csv(snakemake.output.table, index=False)
log.info("sweep %s: %d rows in %.1f s", sweep, len(table), wall)
write_provenance(
    snakemake.output.provenance,
    stage="aot",
    sweep=sweep,
    seed=snakemake.params.seed,
    replica_seeds=train.replica_seeds(),
    device=str(device),
    threads=snakemake.threads,
    sweep_config=spec,
    training=stats["training"],
    groups=stats["groups"],
    wall_seconds=round(wall, 2),
)
