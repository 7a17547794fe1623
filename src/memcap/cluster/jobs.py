"""Each compute job's work and requests, by rule and wildcards: what the Snakefile's
``runtime`` resources and the cluster plan (:mod:`memcap.cluster.plan`) both read. A training
or check job is named by its {job} wildcard (each stage's ``cut`` module turns it back into
what it trains or checks).

No torch import: the Snakefile sizes every job with this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memcap.aot.cut import job_setting, job_sweeps
from memcap.aot.settings import StageSettings as AotStage
from memcap.assumptions.cut import parse_job
from memcap.cluster import costs
from memcap.extract.layer_spec import layer_name
from memcap.real_memorization import settings as real
from memcap.synthetic.cut import job_spec
from memcap.synthetic.settings import StageSettings

OWN_HEAD_DIM = 64  # the head dimension an own d_h is costed at (ViT, BERT, GPT-2)
# Rules that run on the host whatever the device (no GPU route).
HOST_RULES = ("certify_real_capacity",)


@dataclass
class JobCosts:
    """The cost model applied to one config's jobs.

    Attributes:
        config: the validated config.
        rates: the measured rates by device kind (:func:`memcap.cluster.costs.load_rates`).
        entry: a model's typed entry with its layers resolved, by name.
    """

    config: Mapping[str, Any]
    rates: Mapping[str, costs.Rates]
    entry: Callable[[str], Any]

    def kind(self, rule: str) -> str:
        """The device kind a job of ``rule`` runs on: gpu where it asks for one."""
        return "cpu" if self.config["device"] == "cpu" or rule in HOST_RULES else "gpu"

    def work(self, rule: str, wildcards: Mapping[str, str], threads: int) -> costs.Work | None:
        """The work of one job (None: a rule the cost model does not size)."""
        if rule == "train_synthetic":
            return self._synthetic(wildcards)
        if rule == "train_aot":
            return self._aot(wildcards)
        if rule == "check_assumptions":
            return self._checks(wildcards, threads)
        if rule == "extract_model":
            entry = self.entry(wildcards["model"])
            examples, tokens, _ = costs.model_sizes(entry)
            return costs.extract_work(examples, tokens, len(entry.layers))
        if rule == "train_real_memorization":
            return self._real(wildcards)
        if rule == "certify_real_capacity":
            entry, section = self.entry(wildcards["model"]), self.config["capacity"]
            examples, _, d = costs.model_sizes(entry)
            used = min(examples, section["max_T"] or examples)
            return costs.certify_work(used, section["max_H"], d, len(entry.detail_layers))
        return None

    def runtime(self, rule: str, wildcards: Mapping[str, str], threads: int) -> int:
        """The job's wall-time request in minutes (:func:`memcap.cluster.costs.runtime_minutes`)."""
        return costs.runtime_minutes(
            self.work(rule, wildcards, threads), self.rates[self.kind(rule)]
        )

    def expected(self, rule: str, wildcards: Mapping[str, str], threads: int) -> float | None:
        """The job's expected wall seconds, no margin (None: not sized)."""
        work = self.work(rule, wildcards, threads)
        return None if work is None else costs.expected_seconds(work, self.rates[self.kind(rule)])

    def _synthetic(self, wildcards: Mapping[str, str]) -> costs.Work:
        section = self.config["synthetic"]
        spec = job_spec(section, wildcards["job"])
        stage = StageSettings.from_config(section, self.config["seed"], self.config["engine"])
        return costs.synthetic_work(spec, stage)

    def _real(self, wildcards: Mapping[str, str]) -> costs.Work:
        """Every listed layer of the model, once per input, as a synthetic sweep at the
        layer's d (an upper bound: the real tokens skip the embedding's products); an ``own``
        size read as the model's n, d_h = min(64, d) and d / d_h heads (the provenance that
        holds them is written after the DAG is built)."""
        section, model = self.config["real_memorization"], wildcards["model"]
        synthetic = StageSettings.from_config(
            self.config["synthetic"], self.config["seed"], self.config["engine"]
        )
        examples, n, d = costs.model_sizes(self.entry(model))
        d_h = min(OWN_HEAD_DIM, d)
        section = real.resolve(section, {"n": n, "head_dim": d_h, "heads": max(1, d // d_h)})
        stage = real.layer_stage(synthetic, section, d, examples)
        one = costs.synthetic_work(real.sweep(section), stage)
        times = len(section["inputs"]) * len(real.layers_of(section, model))
        return {unit: times * amount for unit, amount in one.items()}

    def _aot(self, wildcards: Mapping[str, str]) -> costs.Work:
        section = self.config["aot"]
        stage = AotStage.from_config(section, self.config["seed"], self.config["engine"])
        job, sweeps = wildcards["job"], section["sweeps"]
        works = [
            costs.aot_work(name, sweeps[name], stage, job_setting(job, name, sweeps[name]))
            for name in job_sweeps(section["cut"], job, list(sweeps))
        ]
        return costs.add(*works)

    def _checks(self, wildcards: Mapping[str, str], threads: int) -> costs.Work:
        section = self.config["assumptions"]
        model, layer = parse_job(wildcards["job"])
        entry = self.entry(model)
        _, _, d = costs.model_sizes(entry)
        detail = {layer_name(layer) for layer in entry.detail_layers}
        every = [layer_name(layer) for layer in (*entry.detail_layers, *entry.depth_rows)]
        layers = every if layer is None else [layer]
        samples = [
            section["samples"] if la in detail else section["depth_samples"] for la in layers
        ]
        on_device = self.kind("check_assumptions") == "gpu" and section["kruskal_search"] in (
            "device",
            "auto",
        )
        return costs.checks_work([(s, d) for s in samples], threads, on_device)
