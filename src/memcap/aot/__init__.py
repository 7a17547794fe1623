"""Paper B: memorization in attention-only transformers (AoT).

Modules: :mod:`~memcap.aot.settings` (sweep and stage settings, parameter counts, which
replicas share a batched model and the memory estimate; no torch), :mod:`~memcap.aot.checks`
(the ``aot`` section's cross-field checks; no torch), :mod:`~memcap.aot.cut` (a job for the
stage, per sweep or per setting, and the setting ids; no torch), :mod:`~memcap.aot.tasks`
(association and distribution tasks), :mod:`~memcap.aot.model` (the replica-batched AoT and
MLP-Transformer, heads merged: the only code that trains, and its training step),
:mod:`~memcap.aot.sweep` (training a sweep through
:func:`memcap.training.loop.train_replicas`), :mod:`~memcap.aot.summary` (summary and fit
tables), :mod:`~memcap.aot.laws` (paper B's findings checked, against the authors' published
accuracies among them), :mod:`~memcap.aot.bounds` (chance, lower bounds, fits) and
:mod:`~memcap.aot.figures`.
Nothing is imported here, so the config checker stays free of torch.
"""
