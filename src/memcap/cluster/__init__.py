"""Running the stages as cluster jobs: what each job costs and how the pieces merge.

- :mod:`~memcap.cluster.merge`: per-setting and per-layer outputs merged into the tables and
  folders a coarser cut writes (no torch).
- :mod:`~memcap.cluster.costs`: each job's wall time and memory from the committed
  measurements (no torch).
- :mod:`~memcap.cluster.jobs`: each compute job's work and requests by rule and wildcards, as
  the Snakefile's resources and the plan read them (no torch).
- :mod:`~memcap.cluster.plan`: the jobs of a dry run scheduled longest first on G devices.

Nothing is imported here, so the Snakefile's imports stay free of torch.
"""
