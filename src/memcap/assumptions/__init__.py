"""The assumption stage: Assumption 2 (context ranks), Assumption 1 and general position (the
Kruskal profile) of every audited layer, per model and across depth.

Modules: :mod:`.settings` (the config section), :mod:`.checks` (tables and records of one
layer), :mod:`.summary` (summary.csv rows), :mod:`.depth` (depth.csv), :mod:`.figures`,
:mod:`.job` (a check job's layers written into their folders, a model's depth profile),
:mod:`.cut` (the check jobs of ``assumptions.cut``) and :mod:`.memory` (job memory), both
importable without torch. Nothing is imported here, so sizing a job or reading a summary does
not pull in the numerics or the plotting stack.
"""
