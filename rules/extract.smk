"""Extract stage: token embeddings (queries, contexts) of real ViT / BERT / GPT-2 models.

One job per (model, layer); its functions (extract_models(), model_layers(name), targets,
params, memory) live in the extract section of rules/common.smk.
"""


rule extract_embeddings:
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
