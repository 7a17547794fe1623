# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: train every setting x seed of one training job's AoT sweeps, one sweep
after another (every sweep, or its own), or every seed of one setting (the {job} wildcard,
memcap.aot.cut), into one table and one provenance record."""

import time

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from memcap.aot.cut import job_setting  # noqa: E402
from memcap.aot.settings import StageSettings  # noqa: E402
from memcap.aot.sweep import run_sweep  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
device = resolve_device(snakemake.params.device)
params = snakemake.params
stage = StageSettings.from_config(params.stage, params.seed, params.engine)
job = snakemake.wildcards.job
tables, sweeps = [], {}
for sweep, spec in params.specs.items():
    only = job_setting(job, sweep, spec)
    start = time.perf_counter()
    result = run_sweep(sweep, spec, stage, device, only)
    wall = time.perf_counter() - start
    tables.append(result.table)
    log.info("sweep %s: %d rows in %.1f s", sweep, len(result.table), wall)
    sweeps[sweep] = {
        **({} if only is None else {"setting": job.partition("/")[2]}),
        "replica_seeds": stage.replicate_seeds(spec),
        "sweep_config": spec,
        "training": result.train,
        "groups": result.groups,
        "wall_seconds": round(wall, 2),
    }
pd.concat(tables, ignore_index=True).to_csv(snakemake.output.table, index=False)
write_provenance(
    snakemake.output.provenance,
    stage="aot",
    job=job,
    seed=params.seed,
    device=str(device),
    threads=snakemake.threads,
    engine=params.engine,
    sweeps=sweeps,
    wall_seconds=round(sum(s["wall_seconds"] for s in sweeps.values()), 2),
)
