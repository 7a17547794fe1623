"""What both papers' experiments share: the training loop, its settings, seeds and fits.

Modules:

- :mod:`~memcap.training.config`: :class:`TrainConfig` and per-sweep overrides (no torch, so
  config checks stay light).
- :mod:`~memcap.training.loop`: the replica-batched training loop.
- :mod:`~memcap.training.engine`: the training step: a model's forward, the loss, autograd.
- :mod:`~memcap.training.update`: one optimisation step, eager or replayed as a CUDA graph.
- :mod:`~memcap.training.objectives`: per-example losses and memorized examples.
- :mod:`~memcap.training.evaluation`: full-data evaluation of every replica.
- :mod:`~memcap.training.record`: every replica's best state, evaluations and curves.
- :mod:`~memcap.training.data`: the replicas' training sets.
- :mod:`~memcap.training.batches`: per-replica mini-batch streams.
- :mod:`~memcap.training.counted`: mini-batches over few distinct examples, weighted.
- :mod:`~memcap.training.active`: the replicas still training; fitted ones leaving.
- :mod:`~memcap.training.schedule`: the learning-rate schedule of a step budget.
- :mod:`~memcap.training.plateau`: whether a replica's loss still fell late (extra budgets
  and the under-trained flag).
- :mod:`~memcap.training.precision`: float32, TF32, bfloat16 compute; subnormals flushed.
- :mod:`~memcap.training.adam`: Adam through the fused kernel.
- :mod:`~memcap.training.allocator`: malloc keeps the step's freed memory.
- :mod:`~memcap.training.seeds`: replicate and derived seeds.
- :mod:`~memcap.training.fits`: least squares with R².

Nothing is imported here, so the config checkers stay free of torch.
"""
