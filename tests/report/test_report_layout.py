"""The report layout's job lists: one benchmark file per job, one for a job over a whole list."""

from memcap.report.layout import JOB_LISTS, benchmark_files


def _jobs(**lists):
    return {name: lists.get(name, []) for name in JOB_LISTS}


def test_a_rule_run_once_for_a_list_has_one_benchmark_file():
    jobs = _jobs(aot=[{"sweep": "heads"}, {"sweep": "low_dim"}], synthetic=[{"sweep": "heads"}])
    files = benchmark_files(jobs)
    assert files["train_aot"] == ["benchmarks/results/train_aot/train_aot.tsv"]
    assert files["run_synthetic_sweep"] == ["benchmarks/results/run_synthetic_sweep/heads.tsv"]
    assert benchmark_files(_jobs())["train_aot"] == []  # the stage is off
