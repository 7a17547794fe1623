"""The report layout: its job lists (one benchmark file per job, one for a job over a whole
list), the report() flags of output folders and the files the page reads."""

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


def test_a_rule_run_once_for_a_list_has_one_benchmark_file():
    aot, synthetic = [{"sweep": "heads"}, {"sweep": "low_dim"}], [{"sweep": "heads"}]
    jobs = _jobs(aot=aot, aot_stage_jobs=aot, synthetic=synthetic, synthetic_sweep_jobs=synthetic)
    files = benchmark_files(jobs)
    assert files["train_aot"] == ["benchmarks/results/train_aot/train_aot.tsv"]
    assert files["run_synthetic_sweep"] == ["benchmarks/results/run_synthetic_sweep/heads.tsv"]
    assert benchmark_files(_jobs())["train_aot"] == []  # the stage is off


def test_a_folder_of_several_kinds_is_one_flag_whose_caption_tells_them_apart():
    folder = "results/assumptions/{model}"
    assert folder_kinds(folder) == ["context_rank", "kruskal_profile", "depth_profile"]
    flag = folder_flag(folder)
    assert flag["patterns"] == [
        "{layer}/{figure,context_rank}.png",
        "{layer}/{figure,kruskal_profile}.png",
        "{figure,depth}.png",
    ]
    assert (flag["caption"], flag["category"]) == ("assumptions_figures.rst", "Assumptions")
    # Each file keeps its kind's labels, told by the pattern's `figure` wildcard.
    depth = figure_labels(folder, {"model": "gpt2", "figure": "depth"})
    assert depth == {"model": "gpt2", "figure": "depth profile"}
    layer = figure_labels(folder, {"model": "gpt2", "layer": "3", "figure": "kruskal_profile"})
    assert layer == {"model": "gpt2", "layer": "3", "figure": "P(k) profile"}
    # The page renders the same caption with the same wildcard.
    entries = figure_entries("depth_profile", _jobs(depth=[{"model": "gpt2"}]), "CAPTIONS")
    assert entries[0]["wildcards"] == {"model": "gpt2", "figure": "depth"}
    assert entries[0]["output"] == "results/assumptions/gpt2"


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
        folder = f"results/assumptions/gpt2/{layer['layer']}"
        assert paths == [f"{folder}/context_rank.png", f"{folder}/kruskal_profile.png"]
    depth = layout["depth"][0]["figures"]
    assert [figure["path"] for figure in depth] == ["results/assumptions/gpt2/depth.png"]
