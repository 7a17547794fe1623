"""Figure captions taken from the stages' Snakemake report captions."""

from memcap.report.captions import CaptionRule, describe_figure, render_caption, rst_to_text


def test_rst_markup_becomes_plain_text():
    assert rst_to_text("A **bold**\n``code`` and `ref`_  end.") == "A bold code and ref end."


def test_caption_template_sees_wildcards_and_config_and_tolerates_unknowns():
    template = (
        "{{ snakemake.wildcards.model }} at {{ snakemake.config['assumptions']['samples'] }}"
        "{% if snakemake.params.missing %} never{% endif %}."
    )
    text = render_caption(template, {"model": "vit"}, {"assumptions": {"samples": 200}})
    assert text == "vit at 200."


def test_describe_figure_matches_pattern_and_titles_from_labels(tmp_path):
    caption = tmp_path / "c.rst"
    caption.write_text("Sweep **{{ snakemake.wildcards.sweep }}**.")
    rules = [
        CaptionRule(
            r"results/aot/figures/(?P<sweep>.+)\.png$", str(caption), "AoT", {"sweep": "{sweep}"}
        ),
        CaptionRule(r"results/x/(?P<model>.+)/p\.png$", str(caption), "X", {"figure": "profile"}),
    ]
    assert describe_figure("/tmp/w/results/aot/figures/heads.png", rules, {}) == (
        "AoT: sweep heads",
        "Sweep heads.",
    )
    title, _ = describe_figure("results/x/bert/p.png", rules, {})
    assert title == "Profile"
    assert describe_figure("results/elsewhere/heads.png", rules, {}) is None
