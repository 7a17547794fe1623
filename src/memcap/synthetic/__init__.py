"""Paper A: memorization capacity of one multi-head attention layer, on synthetic data.

Modules (named as in :mod:`memcap.aot`): :mod:`~memcap.synthetic.settings` (sweep and stage
settings, the config checker and the memory estimate; no torch),
:mod:`~memcap.synthetic.tasks` (uniform queries and contexts, random labels),
:mod:`~memcap.synthetic.model` (the replica-batched MHA model),
:mod:`~memcap.synthetic.sweep` (training and certifying a sweep through
:func:`memcap.training.loop.train_replicas`), :mod:`~memcap.synthetic.summary` (capacity,
fit and saturation tables), :mod:`~memcap.synthetic.laws` (paper A's three laws checked),
:mod:`~memcap.synthetic.bounds` (the linear fit; H(n−1)+1 is :mod:`memcap.theory`) and
:mod:`~memcap.synthetic.figures`. Nothing is imported here, so the config checker stays
free of torch.
"""
