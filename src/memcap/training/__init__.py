"""What both papers' experiments share: the training loop, its settings, seeds and fits.

Modules:

- :mod:`~memcap.training.config`: :class:`TrainConfig`, per-sweep overrides, seeds and the
  learning-rate schedule (no torch, so config checks stay light).
- :mod:`~memcap.training.data`: the replicas' training sets, mini-batch streams, counted
  batches and per-example losses.
- :mod:`~memcap.training.step`: one training step of the replicas still training (fitted
  ones leaving): the model's forward, autograd, Adam through the fused kernel, the bfloat16
  copy.
- :mod:`~memcap.training.graph`: that step replayed as a CUDA graph.
- :mod:`~memcap.training.loop`: the replica-batched training loop, full-data evaluation,
  every replica's best state and the arithmetic's settings (TF32, subnormals).
- :mod:`~memcap.training.plateau`: whether a replica's loss still fell late (extra budgets
  and the under-trained flag).
- :mod:`~memcap.training.fits`: least squares with R².

Nothing is imported here, so the config checkers stay free of torch.
"""
