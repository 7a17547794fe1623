# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: paper A's attention layer trained on each listed layer of one model and
on its i.i.d. controls, into the model's folder ({layer}.csv, {layer}_replicas.csv and
{layer}_provenance.json per layer)."""

import json
import time
from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.devices import resolve_device  # noqa: E402
from memcap.extract.store import ExtractOutputs  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402
from memcap.real_memorization.inputs import Examples  # noqa: E402
from memcap.real_memorization.settings import resolve  # noqa: E402
from memcap.real_memorization.train import train_layer  # noqa: E402
from memcap.synthetic.settings import StageSettings  # noqa: E402
from memcap.training.config import replicate_seeds  # noqa: E402

torch.set_num_threads(snakemake.threads)
config_section, model = snakemake.params.section, snakemake.wildcards.model
device = resolve_device(snakemake.params.device)
engine = dict(snakemake.params.engine)
engine["precision"] = config_section["precision"] or engine["precision"]
synthetic = StageSettings.from_config(snakemake.params.synthetic, snakemake.params.seed, engine)
out = Path(snakemake.output.tables)
out.mkdir(parents=True)
for layer in snakemake.params.layers:
    start = time.perf_counter()
    files = ExtractOutputs.in_folder(snakemake.input.extraction, layer)
    section = resolve(config_section, json.loads(files.provenance.read_text()))
    examples = Examples.load(snakemake.input.extraction, layer, section["n"])
    result = train_layer(examples, section, synthetic, device)
    table = result.capacity.assign(model=model, layer=layer)
    table.to_csv(out / f"{layer}.csv", index=False)
    replicas = result.replicas.assign(model=model, layer=layer)
    replicas.to_csv(out / f"{layer}_replicas.csv", index=False)
    wall = time.perf_counter() - start
    log.info("layer %s in %.1f s:\n%s", layer, wall, table.to_string())
    write_provenance(
        out / f"{layer}_provenance.json",
        stage="real_memorization",
        model=model,
        layer=layer,
        seed=snakemake.params.seed,
        replica_seeds=replicate_seeds(synthetic.base_seed, section["seeds"]),
        settings=section,
        synthetic=snakemake.params.synthetic,
        engine=engine,
        device=str(device),
        inputs=[str(files.queries), str(files.contexts), str(files.provenance)],
        data_checksums=result.checksums,
        wall_seconds=round(wall, 2),
    )
