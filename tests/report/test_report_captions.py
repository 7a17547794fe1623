"""Figure captions taken from the stages' Snakemake report captions."""

from memcap.report.captions import FigureSpec, describe_figure, render_caption, rst_to_text


def test_rst_markup_becomes_plain_text():
    assert rst_to_text("A **bold**\n``code`` and `ref`_  end.") == "A bold code and ref end."


def test_caption_template_sees_wildcards_and_config_and_tolerates_unknowns():
    template = (
        "{{ snakemake.wildcards.model }} at {{ snakemake.config['assumptions']['samples'] }}"
        "{% if snakemake.params.missing %} never{% endif %}."
    )
    text = render_caption(template, {"model": "vit"}, {"assumptions": {"samples": 200}})
    assert text == "vit at 200."


def test_describe_figure_renders_its_caption_and_titles_from_labels(tmp_path):
    caption = tmp_path / "c.rst"
    caption.write_text("Sweep **{{ snakemake.wildcards.sweep }}**.")
    sweep = FigureSpec("results/aot/figures/heads.png", str(caption), "AoT", {"sweep": "heads"},
                       {"sweep": "heads"})  # fmt: skip
    assert describe_figure(sweep, {}) == ("AoT: sweep heads", "Sweep heads.")
    profile = FigureSpec("results/x/bert/p.png", str(caption), "X", {"figure": "profile"})
    assert describe_figure(profile, {})[0] == "Profile"
    bare = FigureSpec("results/x/p_curve.png", str(tmp_path / "missing.rst"))
    assert describe_figure(bare, {}) == ("p_curve", "")


def test_figure_spec_round_trips_the_workflow_layout():
    entry = {"path": "a.png", "caption": "c.rst", "category": "C", "labels": {"figure": "f"},
             "wildcards": {"model": "m"}, "output": "a.png"}  # fmt: skip
    spec = FigureSpec.from_dict(entry)
    assert (spec.path, spec.caption, spec.labels, spec.wildcards) == (
        "a.png", "c.rst", {"figure": "f"}, {"model": "m"}
    )  # fmt: skip
