"""Config checks and every named input/param/target function of the workflow.

Snakemake's linter wants functions apart from rules, so each stage keeps its functions in
its own section below and its rules in rules/<stage>.smk.
"""

import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The package lives in src/; make it importable for the Snakefile even outside an install.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from memcap.errors import ConfigError
from memcap.validation import check_config

try:
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
        + aot_targets()
        + report_targets()
    )


def gpu_request(wildcards=None):
    """GPU count for torch jobs; none when the config pins the CPU, else one."""
    return 0 if config["device"] == "cpu" else 1


# --- extract -------------------------------------------------------------------------------------

import re

from memcap.extract.config import model_entry as typed_model_entry
from memcap.extract.memory import extract_memory_mb, convert_memory_mb
from memcap.extract.weights import weights_path, weights_route

# What each (model, layer) job writes under results/extract/{model}/{layer}/.
EXTRACT_FILES = ("queries.npy", "contexts.npy", "provenance.json")


def extract_models():
    """Names of the configured models: the {model} wildcard values."""
    return [entry["name"] for entry in config["extract"]["models"]]


def extract_entry(name):
    """The (schema-defaulted) config entry of model `name`."""
    for entry in config["extract"]["models"]:
        if entry["name"] == name:
            return entry
    raise ValueError(f"no model named {name!r} in extract.models")


def model_layers(name):
    """Layer wildcard values of model `name`: "0", "1", ..., "random_attention"."""
    return [str(layer) for layer in extract_entry(name)["layers"]]


def extract_targets():
    """Final outputs of the extract stage: three files per (model, layer)."""
    if not stage_enabled("extract"):
        return []
    return [
        f"results/extract/{name}/{layer}/{filename}"
        for name in extract_models()
        for layer in model_layers(name)
        for filename in EXTRACT_FILES
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


def extract_mem_mb(wildcards):
    """Memory request: base, the model's parameters (known from its files where possible, at
    its precision) and the activations of one batch (not T x n x d)."""
    return extract_memory_mb(
        typed_entry(wildcards.model), config["extract"]["batch_size"]
    )


def convert_mem_mb(wildcards):
    """Memory of an ONNX conversion: the graph, its arrays and the timm model."""
    return convert_memory_mb(typed_entry(wildcards.model))


# --- assumptions ---------------------------------------------------------------------------------


# Resident memory of an assumptions job besides its arrays: interpreter, torch, pandas.
ASSUMPTIONS_BASE_MB = 1000
# Batched prefix rows of the Kruskal search's QR route (memcap.rank.BATCH_BYTES) and slack.
KRUSKAL_BATCH_MB = 1024
# Largest n * d of one context assumed when sizing context-rank chunks (n = 512, d = 1024).
CONTEXT_MAX_ND = 512 * 1024


def assumptions_outputs(pattern):
    """``pattern`` expanded over every extracted (model, layer) pair, in config order."""
    return [
        pattern.format(model=name, layer=layer)
        for name in extract_models()
        for layer in model_layers(name)
    ]


def assumptions_targets():
    """Final outputs of the assumptions stage: summary table and per model x layer figures."""
    if not stage_enabled("assumptions"):
        return []
    return (
        ["results/assumptions/summary.csv"]
        + assumptions_outputs("results/assumptions/{model}/{layer}/kruskal_profile.png")
        + assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.png")
    )


def assumptions_settings(wildcards=None):
    """The validated assumptions section, with the seed resolved."""
    section = dict(config["assumptions"])
    if section.get("seed") is None:
        section["seed"] = config["seed"]
    return section


def assumptions_mem_mb(wildcards):
    """Memory of a check: the T x T float64 Gram matrix and Kruskal batch buffers, then three
    float64 copies of one chunk of contexts (the two checks run one after the other)."""
    t = extract_entry(wildcards.model)["data"]["T"]
    kruskal = KRUSKAL_BATCH_MB + 3 * t * t * 8 // 2**20
    contexts = 3 * config["assumptions"]["context_chunk"] * CONTEXT_MAX_ND * 8 // 2**20
    return ASSUMPTIONS_BASE_MB + max(kruskal, contexts)


def assumptions_kruskal_jsons(wildcards):
    """Every (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every (model, layer) context-rank summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.json")


# --- synthetic -----------------------------------------------------------------------------------

import memcap.synthetic_config as synthetic_config

# Resident memory of a certify_real_capacity job besides its arrays: interpreter, torch.
REAL_CAPACITY_BASE_MB = 700
# Model width assumed when sizing that job (the config does not give d; 1024 covers the base
# and large sizes of ViT, BERT and GPT-2).
REAL_CAPACITY_MAX_D = 1024
# Context size assumed when `n` is null: every token of a ViT at 224 px with 16 px patches (197;
# other inputs: raise mem_mb with --set-resources), or at most 128 text tokens (schema: n).
REAL_CAPACITY_FULL_N = {"vit": 197, "bert": 128, "gpt2": 128}


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return synthetic_config.enabled_sweeps(config["synthetic"])


def synthetic_sweep_pattern():
    """Regex of the {sweep} wildcard of the synthetic stage."""
    return "|".join(synthetic_config.SWEEPS)


def real_capacity_enabled():
    """Certified capacity on real embeddings needs the extract stage."""
    return config["synthetic"]["real_capacity"]["enabled"] and stage_enabled("extract")


def synthetic_targets():
    """Final outputs of the synthetic stage: tables, figures, real-data capacity."""
    if not stage_enabled("synthetic"):
        return []
    targets = ["results/synthetic/summary.csv", "results/synthetic/saturation.png"]
    targets += expand(
        "results/synthetic/memorized_{sweep}.png", sweep=synthetic_sweeps()
    )
    if real_capacity_enabled():
        targets += ["results/capacity/real.csv", "results/capacity/real.png"]
    return targets


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def real_capacity_mem_mb(wildcards):
    """Memory of certify_real_capacity: the float32 contexts of the examples it uses, then Z
    (T x H*d float64) with the copies of its reshape and SVD (four in all)."""
    entry = extract_entry(wildcards.model)
    settings = real_capacity_settings(wildcards)
    t = entry["data"]["T"]
    if settings["max_examples"] is not None:
        t = min(t, settings["max_examples"])
    n = entry["n"] or REAL_CAPACITY_FULL_N.get(entry["family"], 128)
    contexts = t * n * REAL_CAPACITY_MAX_D * 4
    features = 4 * t * settings["max_heads"] * REAL_CAPACITY_MAX_D * 8
    return REAL_CAPACITY_BASE_MB + (contexts + features) // 2**20


def real_capacity_settings(wildcards):
    """The validated synthetic.real_capacity settings."""
    return config["synthetic"]["real_capacity"]


def synthetic_sweep_tables(wildcards):
    """One result table per enabled sweep."""
    return expand("results/synthetic/{sweep}.csv", sweep=synthetic_sweeps())


def synthetic_saturation_tables(wildcards):
    """One saturation table per enabled sweep."""
    return expand("results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps())


def real_capacity_tables(wildcards):
    """One certified-capacity table per extracted model and layer."""
    return [
        f"results/capacity/{model}/{layer}.csv"
        for model in extract_models()
        for layer in model_layers(model)
    ]


def synthetic_sweep_mem_mb(wildcards):
    """Memory of a sweep job: its largest batched model's data and activations."""
    return synthetic_config.sweep_memory_mb(config["synthetic"], wildcards.sweep)


# --- aot -----------------------------------------------------------------------------------------

from memcap.aot.settings import sweep_memory_mb


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return list(config["aot"]["sweeps"])


def aot_targets():
    """Final outputs of the aot stage: summary, fits and the figures folder (one per sweep)."""
    if not stage_enabled("aot"):
        return []
    return ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/figures"]


def aot_training(wildcards):
    """The validated aot training settings (the aot section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_sweep_spec(wildcards):
    """One validated sweep: editing another sweep does not rerun this one."""
    return config["aot"]["sweeps"][wildcards.sweep]


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_sweep_mem_mb(wildcards):
    """Memory of a sweep job from its largest batched replica group."""
    spec = config["aot"]["sweeps"][wildcards.sweep]
    return sweep_memory_mb(wildcards.sweep, spec, config["aot"]["seeds"])


# --- report --------------------------------------------------------------------------------------


from snakemake.io import regex_from_filepattern
from snakemake.iocontainers import Wildcards

REPORT_HTML = "reports/report.html"
REPORT_STAGES = ("extract", "assumptions", "synthetic", "aot", "report")


def report_targets():
    """Final output of the report stage: the self-contained page."""
    return [REPORT_HTML] if stage_enabled("report") else []


def report_extract_files(wildcards):
    """Extraction provenance (model, weights, data, T, n, d, warnings) of every model x layer."""
    return [path for path in extract_targets() if Path(path).name == "provenance.json"]


def report_assumptions_files(wildcards):
    """The assumptions summary, figures and P(k) tables of every model x layer."""
    if not stage_enabled("assumptions"):
        return []
    return assumptions_targets() + assumptions_outputs(
        "results/assumptions/{model}/{layer}/kruskal_profile.csv"
    )


def report_synthetic_files(wildcards):
    """Synthetic figures, capacity and fit tables, real-data capacity, sweep provenance."""
    if not stage_enabled("synthetic"):
        return []
    tables = ["results/synthetic/fits.csv", "results/synthetic/capacity.csv"]
    provenance = expand(
        "results/synthetic/{sweep}_provenance.json", sweep=synthetic_sweeps()
    )
    return synthetic_targets() + tables + provenance


def report_aot_files(wildcards):
    """AoT summary, fits, figures folder and sweep provenance."""
    if not stage_enabled("aot"):
        return []
    return aot_targets() + expand(
        "results/aot/{sweep}_provenance.json", sweep=aot_sweeps()
    )


def report_stage_files(wildcards=None):
    """Every stage output the report reads."""
    return (
        report_extract_files(wildcards)
        + report_assumptions_files(wildcards)
        + report_synthetic_files(wildcards)
        + report_aot_files(wildcards)
    )


def report_benchmarks(wildcards):
    """Benchmark files of every job upstream of the report, found by walking the rules back
    from the files it reads (so intermediate jobs count too)."""
    pending, seen, benchmarks = list(report_stage_files(wildcards)), set(), set()
    while pending:
        path = str(pending.pop())
        if path in seen:
            continue
        seen.add(path)
        for step in workflow.rules:
            if step.name in ("render_report", "all") or not step.is_producer(path):
                continue
            job_wildcards = step.get_wildcards(path)
            if step.benchmark:
                benchmarks.add(str(step.expand_benchmark(job_wildcards)))
            inputs = step.expand_input(Wildcards(fromdict=job_wildcards))[0]
            pending.extend(str(f) for f in inputs)
            break
    return sorted(benchmarks)


def report_rule_stages(wildcards):
    """Rule name -> stage (the rules/<stage>.smk file defining it), for wall time per stage."""
    return {step.name: Path(step.snakefile).stem for step in workflow.rules}


def report_caption_rules(wildcards):
    """Every report-flagged output pattern with its caption file, category and labels, so
    the page captions each figure as `snakemake --report` does."""
    captions = []
    for step in workflow.rules:
        for item in step.output:
            flagged = item.flags.get("report")
            if flagged is None or flagged.caption is None:
                continue
            patterns = [f"{item}/{p}" for p in flagged.patterns] or [str(item)]
            captions += [
                {
                    "regex": regex_from_filepattern(pattern),
                    "caption": flagged.caption.get_path_or_uri(secret_free=True),
                    "category": flagged.category,
                    "labels": flagged.labels or {},
                }
                for pattern in patterns
            ]
    return captions


def report_caption_files(wildcards):
    """The caption files of report_caption_rules (inputs, so editing one rebuilds the page)."""
    return sorted({entry["caption"] for entry in report_caption_rules(wildcards)})


def report_stages(wildcards):
    """Which stages the config switches on."""
    return {stage: stage_enabled(stage) for stage in REPORT_STAGES}
