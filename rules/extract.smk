"""Extract stage: token embeddings (queries, contexts) of real vision / encoder / decoder models.

One job per model (extract_model) writes every requested layer from one forward pass per batch
into a temporary folder; extract_embeddings moves each layer's queries, provenance and context
ranks to results/extract/{model}/{layer}/, extract_contexts the contexts of a detail layer
(depth rows store none). Models whose weights are an ONNX graph get their backbone
converted once first. Moving a file starts no interpreter (run:, in Snakemake's own process).
Functions: rules/extract_functions.smk and, shared with other stages, rules/common.smk.
"""


include: "extract_functions.smk"


rule convert_onnx_weights:
    input:
        graph=onnx_graph_input,
    output:
        checkpoint="results/weights/{model}/model.safetensors",
        provenance="results/weights/{model}/provenance.json",
    log:
        "logs/convert_onnx_weights/{model}.log",
    benchmark:
        benchmark_file("convert_onnx_weights")
    wildcard_constraints:
        model=extract_model_pattern(),
    priority: 10  # the longest chain (conversion, then a 13-layer extraction) starts first
    conda:
        "../envs/extract.yaml"
    threads: 1
    resources:
        mem_mb=convert_mem_mb,
    params:
        entry=extract_entry_param,
        index=extract_index_param,
        seed=config["seed"],
    script:
        "../workflow/scripts/convert_onnx_weights.py"


rule extract_model:
    input:
        checkpoint=converted_checkpoint_input,
    output:
        layers=temp(directory("results/extract/{model}/one_pass")),
    log:
        "logs/extract_model/{model}.log",
    benchmark:
        benchmark_file("extract_model")
    wildcard_constraints:
        model=extract_model_pattern(),
    priority: 5  # extraction feeds two stages: start it before the synthetic sweeps
    conda:
        "../envs/extract.yaml"
    threads: 1
    resources:
        mem_mb=extract_mem_mb,
        gpu=gpu_request,
    params:
        entry=extract_entry_param,
        index=extract_index_param,
        layers=extract_layers_param,
        detail_layers=extract_detail_param,
        seed=config["seed"],
        device=config["device"],
        batch_size=config["extract"]["batch_size"],
        error_examples=config["extract"]["error_examples"],
        context_rtol=config["assumptions"]["context_rtol"],
    script:
        "../workflow/scripts/extract_embeddings.py"


# Moves one layer's files out of the model's one-pass folder (no copy): downstream rules and
# users keep addressing results/extract/{model}/{layer}/ as one (model, layer) output.
rule extract_embeddings:
    input:
        layers="results/extract/{model}/one_pass",
    output:
        queries="results/extract/{model}/{layer}/queries.npy",
        provenance="results/extract/{model}/{layer}/provenance.json",
        context_ranks="results/extract/{model}/{layer}/context_ranks.npz",
    log:
        "logs/extract_embeddings/{model}/{layer}.log",
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=LAYER_PATTERN,
    localrule: True
    run:
        take_layer(input.layers, wildcards.layer, output)


# The contexts of a detail layer, moved apart: only detail layers' one-pass folders hold them.
rule extract_contexts:
    input:
        layers="results/extract/{model}/one_pass",
    output:
        contexts="results/extract/{model}/{layer}/contexts.npy",
    log:
        "logs/extract_contexts/{model}/{layer}.log",
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=LAYER_PATTERN,
    localrule: True
    run:
        take_layer(input.layers, wildcards.layer, output)
