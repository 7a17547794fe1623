"""Running the stages as cluster jobs: what each job costs.

- :mod:`~memcap.cluster.costs`: each job's wall time and memory from the committed
  measurements (no torch).
- :mod:`~memcap.cluster.jobs`: each compute job's work and requests by rule and wildcards, as
  the Snakefile's resources and the plan read them (no torch).
- :mod:`~memcap.cluster.plan`: the jobs of a dry run scheduled longest first on G devices.

Nothing is imported here, so the Snakefile's imports stay free of torch.
"""
