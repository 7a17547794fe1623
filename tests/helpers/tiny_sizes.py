"""configs/scale.yaml's architectures shrunk to a few seconds on the CPU: model_kwargs by
model (GPT-2-large, the 7B Llama, ViT-L/16), for the tests that run their code paths."""

SIZES = {
    "GPT2Config": {"n_embd": 32, "n_layer": 3, "n_head": 2, "n_positions": 64},
    "LlamaConfig": {
        "hidden_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
        "vocab_size": 32000,
        "max_position_embeddings": 64,
    },
    "vit_large_patch16_224": {
        "img_size": 32,
        "patch_size": 8,
        "embed_dim": 32,
        "depth": 3,
        "num_heads": 2,
    },
}
