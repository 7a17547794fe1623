"""What both papers' experiments share: the training loop, its settings, seeds and fits.

Modules:

- :mod:`~memcap.training.config`: :class:`TrainConfig`, per-sweep overrides, seeds and the
  learning-rate schedule (no torch, so config checks stay light).
- :mod:`~memcap.training.data`: the replicas' training sets, mini-batch streams and counted
  batches.
- :mod:`~memcap.training.active`: the replicas still training (fitted ones leaving), Adam
  through the fused kernel, float32 / TF32 / bfloat16 arithmetic.
- :mod:`~memcap.training.step`: one training step: per-example losses, the model's forward
  and autograd, the update eager or replayed as a CUDA graph.
- :mod:`~memcap.training.loop`: the replica-batched training loop, full-data evaluation and
  every replica's best state.
- :mod:`~memcap.training.plateau`: whether a replica's loss still fell late (extra budgets
  and the under-trained flag).
- :mod:`~memcap.training.fits`: least squares with R².

Nothing is imported here, so the config checkers stay free of torch.
"""
