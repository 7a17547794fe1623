# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: train every setting x seed of the job's AoT sweeps, one sweep after
another (every sweep, or its {sweep}), or every seed of one setting (its {setting})."""

import time

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.aot.cut import sweep_settings  # noqa: E402
from memcap.aot.settings import StageSettings  # noqa: E402
from memcap.aot.sweep import run_sweep  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
device = resolve_device(snakemake.params.device)
params = snakemake.params
stage = StageSettings.from_config(params.stage, params.seed, params.engine)
setting = snakemake.wildcards.get("setting")
outputs = zip(snakemake.output.tables, snakemake.output.provenance, strict=True)
for (sweep, spec), (table, provenance) in zip(snakemake.params.specs.items(), outputs, strict=True):
    only = None if setting is None else sweep_settings(sweep, spec)[setting]
    start = time.perf_counter()
    result = run_sweep(sweep, spec, stage, device, only)
    wall = time.perf_counter() - start
    result.table.to_csv(table, index=False)
    log.info("sweep %s: %d rows in %.1f s", sweep, len(result.table), wall)
    write_provenance(
        provenance,
        stage="aot",
        sweep=sweep,
        **({} if setting is None else {"setting": setting}),
        seed=snakemake.params.seed,
        replica_seeds=stage.replicate_seeds(spec),
        device=str(device),
        threads=snakemake.threads,
        sweep_config=spec,
        engine=snakemake.params.engine,
        training=result.train,
        groups=result.groups,
        wall_seconds=round(wall, 2),
    )
