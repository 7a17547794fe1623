"""Extract stage: token embeddings (queries, contexts) of real vision / encoder / decoder models.

One job per model (extract_model) writes every requested layer from one forward pass per batch
into the model's folder results/extract/{model}/: per layer {layer}/queries.npy,
provenance.json, context_ranks.npz and, for a detail layer, contexts.npy (depth rows store
none). Later stages take the folder as input. Models whose weights are an ONNX graph get their
backbone converted once first. Functions: rules/extract_functions.smk and, shared with other
stages, rules/common.smk.
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
        model=directory("results/extract/{model}"),
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
