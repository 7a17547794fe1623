"""The report layout: its job lists (one benchmark file per job, one figure for a whole list),
the report() flags of output folders and the files the page reads."""

from memcap.report.layout import (
    JOB_LISTS,
    benchmark_files,
    figure_entries,
    figure_labels,
    folder_flag,
    folder_kinds,
    layout_table,
    report_layout,
    unlisted,
)


def _jobs(**lists):
    return {name: lists.get(name, []) for name in JOB_LISTS}


def test_each_training_job_has_one_benchmark_file_and_a_whole_list_one_figure():
    synthetic = [{"sweep": "heads"}, {"sweep": "head_dim"}]
    jobs = _jobs(
        aot=[{"sweep": "heads"}, {"sweep": "low_dim"}],
        aot_jobs=[{"job": "all"}],
        synthetic=synthetic,
        synthetic_jobs=[{"job": "heads/H1_shared"}, {"job": "head_dim"}],
        assumption_jobs=[{"job": "gpt2/3"}],
    )
    files = benchmark_files(jobs)
    assert files["train_aot"] == ["benchmarks/results/train_aot/all.tsv"]
    assert files["train_synthetic"] == [
        "benchmarks/results/train_synthetic/heads/H1_shared.tsv",
        "benchmarks/results/train_synthetic/head_dim.tsv",
    ]
    assert files["check_assumptions"] == ["benchmarks/results/check_assumptions/gpt2/3.tsv"]
    assert benchmark_files(_jobs())["train_aot"] == []  # the stage is off
    saturation = figure_entries("synthetic_saturation", jobs, "CAPTIONS")
    assert [entry["path"] for entry in saturation] == ["results/synthetic/saturation.png"]
    assert figure_entries("synthetic_saturation", _jobs(), "CAPTIONS") == []


def test_a_layers_folder_of_several_kinds_is_one_flag_whose_caption_tells_them_apart():
    folder = "results/assumptions/jobs/{model}/{layer}"
    assert folder_kinds(folder) == ["context_rank", "kruskal_profile"]
    flag = folder_flag(folder)
    assert flag["patterns"] == ["{figure,context_rank}.png", "{figure,kruskal_profile}.png"]
    assert (flag["caption"], flag["category"]) == ("assumptions_figures.rst", "Assumptions")
    # Each file keeps its kind's labels, told by the pattern's `figure` wildcard.
    layer = figure_labels(folder, {"model": "gpt2", "layer": "3", "figure": "kruskal_profile"})
    assert layer == {"model": "gpt2", "layer": "3", "figure": "P(k) profile"}
    # The page renders the same caption with the same wildcard; the file lies in its layer's
    # folder, itself a check job's or inside its model's.
    detail = _jobs(detail=[{"model": "gpt2", "layer": "3"}])
    entries = figure_entries("kruskal_profile", detail, "CAPTIONS")
    assert entries[0]["wildcards"] == {"model": "gpt2", "layer": "3", "figure": "kruskal_profile"}
    assert entries[0]["output"] == "results/assumptions/jobs/gpt2/3"
    # The depth profile is a figure of its own, drawn by the summary.
    entries = figure_entries("depth_profile", _jobs(depth=[{"model": "gpt2"}]), "CAPTIONS")
    assert entries[0]["wildcards"] == {"model": "gpt2"}
    assert entries[0]["output"] == "results/assumptions/gpt2/depth.png"
    assert entries[0]["caption"] == "CAPTIONS/assumptions_depth.rst"


def test_a_folder_of_one_kind_keeps_its_own_pattern():
    flag = folder_flag("results/aot/figures")
    assert flag["patterns"] == ["{sweep}.png"]
    assert figure_labels("results/aot/figures", {"sweep": "heads"}) == {"sweep": "heads"}
    entries = figure_entries("aot_sweep", _jobs(aot=[{"sweep": "heads"}]), "CAPTIONS")
    assert entries[0]["wildcards"] == {"sweep": "heads"}


def test_every_folder_of_the_table_makes_one_flag():
    folders = {e["folder"] for e in layout_table()["figures"].values() if "folder" in e}
    for folder in folders:
        assert folder_flag(folder)["patterns"]  # raises where its kinds disagree


def test_unlisted_files_are_those_outside_every_input_and_input_folder():
    inputs = ["results/extract/gpt2", "results/assumptions/summary.csv"]
    files = [
        "results/extract/gpt2/0/provenance.json",
        "results/assumptions/summary.csv",
        "results/extract/gpt2-large/0/provenance.json",  # a sibling folder, not inside
        "results/capacity/real.csv",
    ]
    assert unlisted(files, inputs) == files[2:]


def test_each_layer_and_depth_model_gets_its_own_figures():
    detail = [{"model": "gpt2", "layer": "0"}, {"model": "gpt2", "layer": "1"}]
    jobs = _jobs(layers=detail, detail=detail, depth=[{"model": "gpt2"}])
    layout = report_layout(jobs, dict.fromkeys(layout_table()["stages"], True), "CAPTIONS")
    for layer in layout["layers"]:
        paths = [figure["path"] for figure in layer["figures"]]
        folder = f"results/assumptions/jobs/gpt2/{layer['layer']}"
        assert paths == [f"{folder}/context_rank.png", f"{folder}/kruskal_profile.png"]
    depth = layout["depth"][0]["figures"]
    assert [figure["path"] for figure in depth] == ["results/assumptions/gpt2/depth.png"]
