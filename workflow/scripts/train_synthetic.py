# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: train and certify every replica of one training job, a synthetic sweep
or one of its settings (the {job} wildcard, memcap.synthetic.cut)."""

import time

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.devices import resolve_device  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402
from memcap.synthetic.cut import job_spec  # noqa: E402
from memcap.synthetic.settings import StageSettings  # noqa: E402
from memcap.synthetic.summary import capacity_table, describe_fits, fit_table  # noqa: E402
from memcap.synthetic.sweep import run_sweep  # noqa: E402

torch.set_num_threads(snakemake.threads)
section = snakemake.params.section
job = snakemake.wildcards.job
device = resolve_device(snakemake.params.device)
stage = StageSettings.from_config(section, snakemake.params.seed, snakemake.params.engine)
spec = job_spec(section, job)
setting = job.partition("/")[2]
start = time.perf_counter()
result = run_sweep(spec, stage, device)
wall = time.perf_counter() - start
result.table.to_csv(snakemake.output.table, index=False)
result.saturation.to_csv(snakemake.output.saturation, index=False)
if not setting:
    fits = fit_table(capacity_table(result.table))
    log.info("sweep %s done in %.1f s; fits:\n%s", job, wall, describe_fits(fits))
else:
    log.info("job %s: %d rows in %.1f s", job, len(result.table), wall)
write_provenance(
    snakemake.output.provenance,
    stage="synthetic",
    job=job,
    sweep=spec.name,
    **({"setting": setting} if setting else {}),
    seed=snakemake.params.seed,
    replica_seeds=stage.replicate_seeds(spec),
    device=str(device),
    threads=snakemake.threads,
    config=section,
    engine=snakemake.params.engine,
    data_checksum=result.data_checksum,
    wall_seconds=round(wall, 2),
)
