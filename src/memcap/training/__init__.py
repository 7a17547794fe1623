"""What both papers' experiments share: the training loop, its settings, seeds and fits.

Modules: :mod:`~memcap.training.config` (:class:`TrainConfig` and per-sweep overrides; no
torch, so config checks stay light), :mod:`~memcap.training.loop` (the replica-batched
training loop), :mod:`~memcap.training.seeds` (replicate and derived seeds) and
:mod:`~memcap.training.fits` (least squares with R²). Nothing is imported here, so the config
checkers stay free of torch.
"""
