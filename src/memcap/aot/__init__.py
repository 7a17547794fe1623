"""Paper B: memorization in attention-only transformers (AoT).

Modules: :mod:`~memcap.aot.settings` (sweep settings, parameter counts, the config checker;
no torch), :mod:`~memcap.aot.tasks` (association and distribution tasks),
:mod:`~memcap.aot.model` (the replica-batched AoT and MLP-Transformer),
:mod:`~memcap.aot.sweep` (training a sweep through :func:`memcap.train.train_replicas`),
:mod:`~memcap.aot.bounds` (chance, lower bounds, fits) and :mod:`~memcap.aot.figures`.
Nothing is imported here, so the config checker stays free of torch.
"""
