"""The assumption stage: Assumption 2 (context ranks), Assumption 1 and general position (the
Kruskal profile) of every audited layer, per model and across depth.

Modules: :mod:`.settings` (the config section), :mod:`.checks` (tables and records of one
layer), :mod:`.summary` (summary.csv rows), :mod:`.depth` (depth.csv), :mod:`.figures`,
:mod:`.job` (one model's checks written into its folder), :mod:`.memory` (job memory,
importable without torch). Nothing is imported here, so sizing a job or reading a summary does
not pull in the numerics or the plotting stack.
"""
