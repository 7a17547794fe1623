"""Paper A's recipe options in one run: capacity against CPU seconds at the default heads sweep.

The candidates for a stronger recipe, each applied to the config's ``synthetic`` section
and run as the pipeline runs it (:func:`memcap.synthetic.sweep.run_sweep`: the ladder, the
convergence check, five seeds) at H = 1, 2 and 4 of the heads sweep with random contexts and
classification, one process and one thread per option, two options at a time:

- ``config``: the config's own recipe (``config.yaml``: the ladder past the maximum, one
  restart of a replica that fell along T);
- ``restarts-0``: no restarts; ``fraction-only``: no restarts, and the ladder grown by the
  ``grow_at`` rule alone (``past_maximum: false``);
- ``restarts-2``: two restarts at most; ``steps-2x``: 2,000 steps a budget; ``no-warmup``:
  ``warmup_frac: 0``; ``lr-0.06``: twice the rate.

Per option it prints the median and best seed's capacity (most examples memorized at any T)
at each H, the CPU seconds, and the medians' sum per CPU second. The last line is ``RATIO
<the config's medians per CPU second / the best option's>``: what the config's choice costs
in capacity per CPU second against the cheapest option (below 1: it pays for something the
cheaper one does not give, docs/synthetic.md says what).

    .venv/bin/python benchmarks/recipe_options.py
    .venv/bin/python benchmarks/recipe_options.py --values 1 --options config "steps-2x"
"""

from __future__ import annotations

import argparse
import copy
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import yaml
from _results import record

ROOT = Path(__file__).resolve().parents[1]
OPTIONS: dict[str, dict] = {
    "config": {},
    "restarts-0": {"ladder": {"restarts": 0}},
    "fraction-only": {"ladder": {"past_maximum": False, "restarts": 0}},
    "restarts-2": {"ladder": {"restarts": 2}},
    "steps-2x": {"train": {"steps": 2000}},
    "no-warmup": {"train": {"warmup_frac": 0.0}},
    "lr-0.06": {"train": {"lr": 0.06}},
}


def run_option(name: str, values: list[int], config_path: Path) -> dict:
    """Option ``name`` on the heads sweep's ``values`` (random contexts, classification): its
    capacities per H (median, best, seeds) and CPU seconds."""
    import torch

    from memcap.config_schema import validate_schema
    from memcap.synthetic.settings import StageSettings, sweep_spec
    from memcap.synthetic.sweep import run_sweep

    torch.set_num_threads(1)
    config = yaml.safe_load(config_path.read_text())
    section = config["synthetic"]
    for key, changes in OPTIONS[name].items():
        section[key] = {**section.get(key, {}), **changes}
    heads = copy.deepcopy(section["sweeps"]["heads"])
    heads.update(values=values, contexts=["random"], tasks=["classification"])
    section["sweeps"] = {"heads": heads}
    validate_schema(config, ROOT / "workflow/schemas/config.schema.yaml")
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    start = time.process_time()
    table = run_sweep(sweep_spec(section, "heads"), stage, torch.device("cpu")).table
    cpu = time.process_time() - start
    capacity = table.groupby(["value", "seed"])["memorized"].max()
    per_H = {
        int(H): {
            "median": float(capacity.loc[H].median()),
            "best": int(capacity.loc[H].max()),
            "seeds": [int(c) for c in capacity.loc[H]],
        }
        for H in values
    }
    medians = sum(c["median"] for c in per_H.values())
    return {"option": name, "cpu_s": round(cpu, 1), "per_H": per_H, "per_cpu_s": medians / cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--values", type=int, nargs="+", default=[1, 2, 4], help="H values")
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=list(OPTIONS))
    parser.add_argument("--jobs", type=int, default=2, help="options run at once")
    args = parser.parse_args()
    names = args.options if "config" in args.options else ["config", *args.options]
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        repeated = [args.values] * len(names), [args.config] * len(names)
        runs = list(pool.map(run_option, names, *repeated))
    for run in runs:
        cells = ", ".join(
            f"H={H}: {c['median']:g} (best {c['best']})" for H, c in run["per_H"].items()
        )
        print(f"{run['option']:<14} {run['cpu_s']:7.1f} s CPU  {run['per_cpu_s']:.2f}/s  {cells}")
    ours = runs[0]
    best = max(runs, key=lambda r: r["per_cpu_s"])
    ratio = ours["per_cpu_s"] / best["per_cpu_s"]
    record(
        __file__,
        "paper A's recipe options at H = 1, 2, 4 of the default heads sweep (random contexts, "
        "classification, five seeds): median capacity per CPU second",
        ratio,
        ("config", ours["cpu_s"], "s CPU"),
        (best["option"], best["cpu_s"], "s CPU"),
        ratio_is="the config's sum of median capacities per CPU second / the best option's",
        repeats=1,
        settings=args,
        summary="; ".join(
            f"{r['option']}: {r['cpu_s']} s, medians "
            + "/".join(f"{c['median']:g}" for c in r["per_H"].values())
            + ", best "
            + "/".join(str(c["best"]) for c in r["per_H"].values())
            for r in runs
        ),
        extra={"runs": runs},
    )
    print(f"RATIO {ratio:.3f}")


if __name__ == "__main__":
    main()
