"""Config validation and every named input/param/target function of the workflow.

Snakemake's linter wants functions apart from rules, so each stage keeps its functions in
its own section below and its rules in rules/<stage>.smk.
"""

import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The package lives in src/; make it importable for the Snakefile even outside an install.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.validation import check_config, check_moved_keys

# Keys of an older config shape first (the schema would only call them unknown), then the
# schema (which fills in every default), then the checks a schema cannot express.
try:
    check_moved_keys(config)
    validate_schema(config, workflow.source_path("../workflow/schemas/config.schema.yaml"))
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None


def stage_enabled(stage):
    """Whether the config switches the stage on (the schema defaults it to on)."""
    return config[stage].get("enabled", True)


def all_targets(wildcards):
    """Every final output of the enabled stages, ending in the report."""
    return (
        extract_targets()
        + assumptions_targets()
        + synthetic_targets()
        + capacity_targets()
        + aot_targets()
        + report_targets()
    )


def gpu_request(wildcards=None):
    """GPU count for torch jobs; none when the config pins the CPU, else one."""
    return 0 if config["device"] == "cpu" else 1


# --- extract -------------------------------------------------------------------------------------

import re
from functools import cache

from memcap.extract.config import layer_name, model_entry as typed_model_entry
from memcap.extract.depth import with_layers
from memcap.extract.memory import extract_memory_mb, convert_memory_mb
from memcap.extract.weights import weights_path, weights_route

# What extraction writes under results/extract/{model}/{layer}/ for every layer; the detail
# layers add contexts.npy (extract_contexts), depth rows do not store their contexts.
EXTRACT_FILES = ("queries.npy", "provenance.json", "context_ranks.npz")


def extract_models():
    """Names of the configured models: the {model} wildcard values."""
    return [entry["name"] for entry in config["extract"]["models"]]


def extract_entry(name):
    """The (schema-defaulted) config entry of model `name`."""
    for entry in config["extract"]["models"]:
        if entry["name"] == name:
            return entry
    raise ValueError(f"no model named {name!r} in extract.models")


@cache
def resolved_entry(name):
    """The typed entry of model `name` with explicit layers (`all` and ranges resolved; a
    depth no file gives builds the architecture once, without weights)."""
    try:
        return with_layers(typed_entry(name))
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


def model_layers(name):
    """Layer wildcard values of model `name`: "0", "1", ..., "random_attention"."""
    return [layer_name(layer) for layer in resolved_entry(name).layers]


def model_detail_layers(name):
    """Layer wildcard values of model `name`'s detail layers (audited in full)."""
    return [layer_name(layer) for layer in resolved_entry(name).detail_layers]


def model_depth_rows(name):
    """Layer wildcard values of model `name`'s depth rows (its other layers)."""
    return [layer_name(layer) for layer in resolved_entry(name).depth_rows]


def extract_targets():
    """Final outputs of the extract stage: three files per (model, layer), and the contexts
    of every detail layer."""
    if not stage_enabled("extract"):
        return []
    return [
        f"results/extract/{name}/{layer}/{filename}"
        for name in extract_models()
        for layer in model_layers(name)
        for filename in EXTRACT_FILES
    ] + [
        f"results/extract/{name}/{layer}/contexts.npy"
        for name in extract_models()
        for layer in model_detail_layers(name)
    ]


def extract_model_pattern():
    """Regex of the {model} wildcard: exactly the configured names."""
    return "|".join(re.escape(name) for name in extract_models()) or "(?!)"


def extract_entry_param(wildcards):
    """Config entry of the job's model."""
    return extract_entry(wildcards.model)


def extract_index_param(wildcards):
    """Position of the job's model in extract.models, for error messages."""
    return extract_models().index(wildcards.model)


def typed_entry(name):
    """The typed ModelEntry of model `name`."""
    return typed_model_entry(
        extract_entry(name), extract_models().index(name), config["seed"]
    )


def onnx_graph_input(wildcards):
    """The ONNX graph whose backbone the model's weights are converted from."""
    return str(weights_path(typed_entry(wildcards.model)))


def converted_checkpoint_input(wildcards):
    """The converted checkpoint of a model with ONNX weights; nothing for other models."""
    if weights_route(typed_entry(wildcards.model)) != "onnx":
        return []
    return f"results/weights/{wildcards.model}/model.safetensors"


def extract_layers_param(wildcards):
    """Every requested layer of the model, extracted in one pass."""
    return model_layers(wildcards.model)


def extract_detail_param(wildcards):
    """The model's detail layers: the only ones whose contexts the pass stores."""
    return model_detail_layers(wildcards.model)


def extract_mem_mb(wildcards):
    """Memory request: base, the model's parameters (known from its files where possible, at
    its precision) and the activations of one batch with every kept layer (not T x n x d).
    """
    return extract_memory_mb(
        typed_entry(wildcards.model),
        config["extract"]["batch_size"],
        len(model_layers(wildcards.model)),
    )


def convert_mem_mb(wildcards):
    """Memory of an ONNX conversion: the graph, its arrays and the timm model."""
    return convert_memory_mb(typed_entry(wildcards.model))


# --- assumptions ---------------------------------------------------------------------------------

from memcap.assumptions_memory import check_memory_mb


def assumptions_outputs(pattern):
    """``pattern`` expanded over every detail (model, layer) pair, in config order."""
    return [
        pattern.format(model=name, layer=layer)
        for name in extract_models()
        for layer in model_detail_layers(name)
    ]


def depth_models():
    """Models with a depth profile: at least one depth row, or three numbered layers."""
    return [
        name
        for name in extract_models()
        if model_depth_rows(name)
        or sum(layer.isdigit() for layer in model_layers(name)) >= 3
    ]


def assumptions_depth_outputs(pattern):
    """``pattern`` expanded over every model with a depth profile."""
    return [pattern.format(model=name) for name in depth_models()]


def assumptions_targets():
    """Final outputs of the assumptions stage: summary table, per detail layer figures and
    per model depth profiles."""
    if not stage_enabled("assumptions"):
        return []
    return (
        ["results/assumptions/summary.csv"]
        + assumptions_outputs("results/assumptions/{model}/{layer}/kruskal_profile.png")
        + assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.png")
        + assumptions_depth_outputs("results/assumptions/{model}/depth_profiles.csv")
        + assumptions_depth_outputs("results/assumptions/{model}/depth.png")
    )


def assumptions_settings(wildcards=None):
    """The validated assumptions section, with the seed resolved."""
    section = dict(config["assumptions"])
    if section.get("seed") is None:
        section["seed"] = config["seed"]
    return section


def assumptions_mem_mb(wildcards):
    """Memory request of one check, from the model's T and the context chunk."""
    return check_memory_mb(
        extract_entry(wildcards.model)["data"]["T"],
        config["assumptions"]["context_chunk"],
    )


def assumptions_kruskal_jsons(wildcards):
    """Every (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every (model, layer) context-rank summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.json")


def assumptions_depth_tables(wildcards):
    """Every model's depth table (its depth rows' summaries), in config order."""
    return assumptions_depth_outputs("results/assumptions/{model}/depth.csv")


def depth_row_files(filename):
    """Input function: ``filename`` of every depth row of the job's model."""

    def files(wildcards):
        return [
            f"results/extract/{wildcards.model}/{layer}/{filename}"
            for layer in model_depth_rows(wildcards.model)
        ]

    return files


def detail_layer_files(filename):
    """Input function: the assumptions' ``filename`` of every detail layer of the job's model."""

    def files(wildcards):
        return [
            f"results/assumptions/{wildcards.model}/{layer}/{filename}"
            for layer in model_detail_layers(wildcards.model)
        ]

    return files


def depth_rows_param(wildcards):
    """The job's model's depth rows, in the order of its inputs."""
    return model_depth_rows(wildcards.model)


def detail_layers_param(wildcards):
    """The job's model's detail layers, in the order of its inputs."""
    return model_detail_layers(wildcards.model)


# --- synthetic -----------------------------------------------------------------------------------

import memcap.synthetic.settings as synthetic_settings


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return synthetic_settings.sweep_names(config["synthetic"])


def synthetic_sweep_pattern():
    """Regex of the {sweep} wildcard of the synthetic stage."""
    return "|".join(synthetic_settings.SWEEPS)


def synthetic_targets():
    """Final outputs of the synthetic stage: tables and figures."""
    if not stage_enabled("synthetic"):
        return []
    targets = ["results/synthetic/summary.csv", "results/synthetic/saturation.png"]
    return targets + expand(
        "results/synthetic/memorized_{sweep}.png", sweep=synthetic_sweeps()
    )


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def synthetic_sweep_tables(wildcards):
    """One result table per enabled sweep."""
    return expand("results/synthetic/{sweep}.csv", sweep=synthetic_sweeps())


def synthetic_saturation_tables(wildcards):
    """One saturation table per enabled sweep."""
    return expand("results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps())


def synthetic_sweep_mem_mb(wildcards):
    """Memory of a sweep job: its largest batched model's data and activations."""
    return synthetic_settings.sweep_memory_mb(config["synthetic"], wildcards.sweep)


# --- capacity ------------------------------------------------------------------------------------

from memcap.capacity.settings import certify_memory_mb


def capacity_enabled():
    """Certified capacity on real embeddings needs the extract stage."""
    return stage_enabled("capacity") and stage_enabled("extract")


def capacity_targets():
    """Final outputs of the capacity stage: the merged table and its figure."""
    if not capacity_enabled():
        return []
    return ["results/capacity/real.csv", "results/capacity/real.png"]


def capacity_section(wildcards):
    """The validated capacity config section."""
    return config["capacity"]


def capacity_tables(wildcards):
    """One certified-capacity table per detail layer (depth rows store no contexts)."""
    return [
        f"results/capacity/{model}/{layer}.csv"
        for model in extract_models()
        for layer in model_detail_layers(model)
    ]


def capacity_mem_mb(wildcards):
    """Memory of certify_real_capacity on the job's model."""
    return certify_memory_mb(config["capacity"], extract_entry(wildcards.model))


# --- aot -----------------------------------------------------------------------------------------

import memcap.aot.settings as aot_settings


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return aot_settings.sweep_names(config["aot"])


def aot_targets():
    """Final outputs of the aot stage: summary, fits and the figures folder (one per sweep)."""
    if not stage_enabled("aot"):
        return []
    return ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/figures"]


def aot_stage(wildcards):
    """The validated aot settings shared by every sweep (the section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_sweep_spec(wildcards):
    """One validated sweep: editing another sweep does not rerun this one."""
    return config["aot"]["sweeps"][wildcards.sweep]


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_sweep_mem_mb(wildcards):
    """Memory of a sweep job from its largest batched replica group."""
    return aot_settings.sweep_memory_mb(config["aot"], wildcards.sweep)


# --- report --------------------------------------------------------------------------------------


REPORT_HTML = "reports/report.html"
REPORT_STAGES = ("extract", "assumptions", "synthetic", "capacity", "aot", "report")
REPORT_CAPTIONS = "../workflow/report/"

# Every figure of the page, by kind: its stage, path pattern and Snakemake report flags. The
# rules flag their outputs through figure_report(kind), so the page captions each figure as
# `snakemake --report` does, from the same entry.
REPORT_FIGURES = {
    "context_rank": {
        "stage": "assumptions",
        "pattern": "results/assumptions/{model}/{layer}/context_rank.png",
        "caption": "assumptions_context_rank.rst",
        "category": "Assumptions",
        "subcategory": "{model}",
        "labels": {"model": "{model}", "layer": "{layer}", "figure": "context ranks"},
    },
    "kruskal_profile": {
        "stage": "assumptions",
        "pattern": "results/assumptions/{model}/{layer}/kruskal_profile.png",
        "caption": "assumptions_kruskal_profile.rst",
        "category": "Assumptions",
        "subcategory": "{model}",
        "labels": {"model": "{model}", "layer": "{layer}", "figure": "P(k) profile"},
    },
    "depth_profile": {
        "stage": "assumptions",
        "jobs": "depth",  # one per model with a depth profile, not per layer
        "pattern": "results/assumptions/{model}/depth.png",
        "caption": "assumptions_depth.rst",
        "category": "Assumptions",
        "subcategory": "{model}",
        "labels": {"model": "{model}", "figure": "depth profile"},
    },
    "capacity_real": {
        "stage": "capacity",
        "pattern": "results/capacity/real.png",
        "caption": "capacity_real.rst",
        "category": "Certified capacity",
        "subcategory": "Real embeddings",
        "labels": {"figure": "certified capacity"},
    },
    "synthetic_memorized": {
        "stage": "synthetic",
        "pattern": "results/synthetic/memorized_{sweep}.png",
        "caption": "synthetic_memorized.rst",
        "category": "Synthetic capacity",
        "subcategory": "Scaling laws",
        "labels": {"sweep": "{sweep}"},
    },
    "synthetic_saturation": {
        "stage": "synthetic",
        "pattern": "results/synthetic/saturation.png",
        "caption": "synthetic_saturation.rst",
        "category": "Synthetic capacity",
        "subcategory": "Softmax saturation",
        "labels": {"figure": "saturation per head"},
    },
    "aot_sweep": {
        "stage": "aot",
        "pattern": "results/aot/figures/{sweep}.png",
        "folder": "results/aot/figures",  # plot_aot writes one folder of figures
        "caption": "aot_sweep.rst",
        "category": "Attention-only transformers",
        "subcategory": "Sweeps",
        "labels": {"sweep": "{sweep}"},
    },
}

# Compute rules with a benchmark file per job: rule -> (stage, benchmark pattern). The rules
# name their benchmark through benchmark_file(rule).
BENCHMARKS = {
    "convert_onnx_weights": (
        "extract",
        "benchmarks/results/convert_onnx_weights/{model}.tsv",
    ),
    "extract_model": (
        "extract",
        "benchmarks/results/extract_model/{model}.tsv",
    ),
    "check_assumptions": (
        "assumptions",
        "benchmarks/results/check_assumptions/{model}/{layer}.tsv",
    ),
    "profile_depth": (
        "assumptions",
        "benchmarks/results/profile_depth/{model}.tsv",
    ),
    "certify_real_capacity": (
        "capacity",
        "benchmarks/results/certify_real_capacity/{model}/{layer}.tsv",
    ),
    "run_synthetic_sweep": (
        "synthetic",
        "benchmarks/results/run_synthetic_sweep/{sweep}.tsv",
    ),
    "train_aot_sweep": ("aot", "benchmarks/results/train_aot_sweep/{sweep}.tsv"),
}


def figure_report(kind):
    """The report() flag of a figure kind: its file pattern, or its folder and file pattern."""
    entry = REPORT_FIGURES[kind]
    folder = entry.get("folder")
    return report(
        directory(folder) if folder else entry["pattern"],
        patterns=[str(Path(entry["pattern"]).relative_to(folder))] if folder else [],
        caption=f"{REPORT_CAPTIONS}{entry['caption']}",
        category=entry["category"],
        subcategory=entry["subcategory"],
        labels=entry["labels"],
    )


def benchmark_file(name):
    """Benchmark file pattern of the compute rule ``name``."""
    return BENCHMARKS[name][1]


def stage_jobs(stage):
    """Wildcards of every per-model or per-sweep job of an enabled stage, from the config:
    every layer for extract, the detail layers for assumptions and capacity."""
    if stage in ("extract", "assumptions", "capacity"):
        on = stage_enabled(stage) if stage != "capacity" else capacity_enabled()
        layers = model_layers if stage == "extract" else model_detail_layers
        return (
            [
                {"model": name, "layer": layer}
                for name in extract_models()
                for layer in layers(name)
            ]
            if on
            else []
        )
    if stage == "synthetic":
        return (
            [{"sweep": s} for s in synthetic_sweeps()] if stage_enabled(stage) else []
        )
    if stage == "aot":
        return [{"sweep": s} for s in aot_sweeps()] if stage_enabled(stage) else []
    return []


def benchmark_jobs(name):
    """Wildcards of every job of the compute rule ``name`` that the config asks for."""
    stage = BENCHMARKS[name][0]
    if name == "extract_model":
        return [{"model": model} for model in extract_models() if stage_enabled(stage)]
    if name == "profile_depth":
        return [{"model": model} for model in depth_models() if stage_enabled(stage)]
    if name == "convert_onnx_weights":
        return [
            {"model": model}
            for model in extract_models()
            if stage_enabled(stage) and weights_route(typed_entry(model)) == "onnx"
        ]
    return stage_jobs(stage)


def _figure_entries(kind):
    """One entry per file of a figure kind: path, caption file, category, labels, wildcards."""
    entry = REPORT_FIGURES[kind]
    if entry.get("jobs") == "depth":
        jobs = [{"model": m} for m in depth_models() if stage_enabled(entry["stage"])]
    else:
        jobs = stage_jobs(entry["stage"])
    if "{" not in entry["pattern"]:
        jobs = jobs[:1] and [{}]
    return [
        {
            "path": entry["pattern"].format(**job),
            "output": entry.get("folder") or entry["pattern"].format(**job),
            "caption": workflow.source_path(f"{REPORT_CAPTIONS}{entry['caption']}"),
            "category": entry["category"],
            "labels": {k: v.format(**job) for k, v in entry["labels"].items()},
            "wildcards": job,
        }
        for job in jobs
    ]


def report_targets():
    """Final output of the report stage: the self-contained page."""
    return [REPORT_HTML] if stage_enabled("report") else []


def report_layout(wildcards=None):
    """Every file the page reads, by name, computed from the config (JSON-able)."""
    assumptions_on = stage_enabled("assumptions")
    audited = {(job["model"], job["layer"]) for job in stage_jobs("assumptions")}
    layers = [
        {
            "model": job["model"],
            "layer": job["layer"],
            "provenance": f"results/extract/{job['model']}/{job['layer']}/provenance.json",
            "kruskal_profile": (
                f"results/assumptions/{job['model']}/{job['layer']}/kruskal_profile.csv"
                if (job["model"], job["layer"]) in audited
                else None
            ),
            "figures": [
                figure
                for kind in ("context_rank", "kruskal_profile")
                for figure in _figure_entries(kind)
                if figure["wildcards"] == job
            ],
        }
        for job in stage_jobs("extract")
    ]
    depth = [
        {
            "model": figure["wildcards"]["model"],
            "table": f"results/assumptions/{figure['wildcards']['model']}/depth.csv",
            "figures": [figure],
        }
        for figure in _figure_entries("depth_profile")
    ]
    stages = {
        "extract": {"records": [layer["provenance"] for layer in layers]},
        "assumptions": {
            "tables": (
                {"summary": "results/assumptions/summary.csv"} if assumptions_on else {}
            )
        },
        "capacity": {
            "tables": (
                {"real": "results/capacity/real.csv"} if capacity_enabled() else {}
            ),
            "records": (
                [
                    path.replace(".csv", "_provenance.json")
                    for path in capacity_tables(None)
                ]
                if capacity_enabled()
                else []
            ),
        },
        "synthetic": {
            "tables": (
                {
                    "fits": "results/synthetic/fits.csv",
                    "laws": "results/synthetic/laws.csv",
                    "capacity": "results/synthetic/capacity.csv",
                }
                if stage_enabled("synthetic")
                else {}
            ),
            "records": [
                f"results/synthetic/{job['sweep']}_provenance.json"
                for job in stage_jobs("synthetic")
            ],
        },
        "aot": {
            "tables": (
                {
                    "fits": "results/aot/fits.csv",
                    "laws": "results/aot/laws.csv",
                    "summary": "results/aot/summary.csv",
                }
                if stage_enabled("aot")
                else {}
            ),
            "records": [
                f"results/aot/{job['sweep']}_provenance.json"
                for job in stage_jobs("aot")
            ],
        },
    }
    for kind, entry in REPORT_FIGURES.items():
        if entry["stage"] != "assumptions":
            stages[entry["stage"]].setdefault("figures", []).extend(
                _figure_entries(kind)
            )
    benchmarks = {
        name: [pattern.format(**job) for job in benchmark_jobs(name)]
        for name, (_, pattern) in BENCHMARKS.items()
    }
    return {
        "layers": layers,
        "depth": depth,
        "stages": stages,
        "benchmarks": benchmarks,
        "rule_stages": {name: stage for name, (stage, _) in BENCHMARKS.items()},
    }


def report_stage_files(wildcards):
    """The stage outputs the page reads (tables, figures, provenance), for the rule's inputs."""
    layout = report_layout()
    files = []
    for layer in layout["layers"]:
        files.append(layer["provenance"])
        files += [layer["kruskal_profile"]] if layer["kruskal_profile"] else []
        files += [figure["output"] for figure in layer["figures"]]
    for model in layout["depth"]:
        files += [model["table"]] + [figure["output"] for figure in model["figures"]]
    for stage in layout["stages"].values():
        files += list(stage.get("tables", {}).values()) + stage.get("records", [])
        files += [figure["output"] for figure in stage.get("figures", [])]
    return list(dict.fromkeys(files))


def report_benchmarks(wildcards):
    """Benchmark files of every compute job upstream of the page."""
    return sorted(
        {f for files in report_layout()["benchmarks"].values() for f in files}
    )


def report_caption_files(wildcards):
    """Caption files of the page's figures (inputs, so editing one rebuilds the page)."""
    return sorted(
        {
            workflow.source_path(f"{REPORT_CAPTIONS}{e['caption']}")
            for e in REPORT_FIGURES.values()
        }
    )


def report_stages(wildcards):
    """Which stages the config switches on."""
    return {stage: stage_enabled(stage) for stage in REPORT_STAGES}
