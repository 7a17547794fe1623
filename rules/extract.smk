"""Extract stage: token embeddings (queries, contexts) of real vision / encoder / decoder models.

One job per (model, layer); models whose weights are an ONNX graph get their backbone
converted once first. The functions (extract_models(), model_layers(name), targets, params,
memory) live in the extract section of rules/common.smk.
"""


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


rule extract_embeddings:
    input:
        checkpoint=converted_checkpoint_input,
    output:
        queries="results/extract/{model}/{layer}/queries.npy",
        contexts="results/extract/{model}/{layer}/contexts.npy",
        provenance="results/extract/{model}/{layer}/provenance.json",
    log:
        "logs/extract_embeddings/{model}/{layer}.log",
    benchmark:
        benchmark_file("extract_embeddings")
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/extract.yaml"
    threads: 1
    resources:
        mem_mb=extract_mem_mb,
        gpu=gpu_request,
    params:
        entry=extract_entry_param,
        index=extract_index_param,
        seed=config["seed"],
        device=config["device"],
        batch_size=config["extract"]["batch_size"],
    script:
        "../workflow/scripts/extract_embeddings.py"
