"""The page of the stored default run as its reader meets it: the answer per model on the first
screen, limitations that are limitations, terms defined where first used, counts in their
units, the zero line and the Kruskal rank on the verdicts' scale."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from report_fixture import load
from test_report_render import TEMPLATE

from memcap.report import write_report
from memcap.report.answer import grant_words, model_answers, rests_on
from memcap.report.render import render_html

TERMS = {"delta": "δ", "zero-line": "zero line", "decade": "decade", "tau": "τ", "ra": "RA",
         "room": "room"}  # fmt: skip


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stored")
    page = folder / "report.html"
    context = write_report(load(folder / "run"), TEMPLATE, page)
    return context, page.read_text(encoding="utf-8")


def _layer(context, model, layer):
    return next(
        s for s in context.layers
        if (s.verdicts.evidence.model, s.verdicts.evidence.layer) == (model, layer)
    )  # fmt: skip


def test_each_model_gets_what_theorem_1_grants_at_its_own_heads(stored):
    context, _ = stored
    bert = context.answer("bert-base-random")
    assert bert.granted == "757"  # BERT-base: 12 heads, min(800, 12·63 + 1)
    assert "H = 12 heads, min(800, 12·63 + 1)" in bert.grants
    (sampled, certified, unresolved, contexts) = bert.rests_on
    assert unresolved == (
        "certified capacity on one shared context: 3 of 8 ranks not one number at layer 1 "
        "(each a range from its certified count up)"
    )
    assert sampled.startswith("P(64) = 1 over 500 random 64-subsets")
    assert sampled.endswith("at layers 1, RA: ≤ 0.6% of 64-subsets dependent (95% bound)")
    assert "only ≥ 2" in certified and "sampled evidence, not a proof" in certified
    assert contexts == "every context of the 800 a decade clear"
    # the model's own d_h = 64 < n = 197: the construction's 12·63 + 1, not min(800, 12·196 + 1)
    vit = context.answer("vit-b16-random")
    assert vit.granted == "757" and "capped" not in vit.grants
    assert "d_h = 64 < n = 197: the construction's min(800, 12·63 + 1)" in vit.grants
    assert "Theorem 1's H(n−1)+1 = 2,353 needs d_h ≥ 197" in vit.grants
    assert context.answer("dinov2-s14-pretrained").granted == "379"  # 6 heads of 64, n = 257
    minilm = context.answer("minilm-l6-pretrained")  # 500 orderings at 1, RA; 100 at 2–6
    assert minilm.granted == "373"  # 12 heads of d_h = 32 < n = 64: 12·31 + 1
    assert any("100 random 64-subsets" in line and "≤ 3.0%" in line for line in minilm.rests_on)
    assert context.answer("smollm2-135m-pretrained").granted == "568"  # 9 heads: 9·63 + 1


def test_without_a_recorded_head_count_no_number_is_granted(stored):
    context, _ = stored
    model = next(m for m in context.models if m.name == "bert-base-random")
    ev = _layer(context, "bert-base-random", "1").verdicts.evidence
    value, words = grant_words(replace(model, H=None), ev)
    assert value == "—" and "no head count" in words
    answers = model_answers(context.layers, [replace(m, H=None) for m in context.models])
    assert {a.granted for a in answers} == {"—"}


def test_what_a_grant_rests_on_follows_the_stage_s_numbers(stored):
    """Some subsets within a decade: counted; a summary without decisions: P(n) at τ."""
    context, _ = stored
    section = _layer(context, "bert-base-random", "1")
    ev = section.verdicts.evidence
    close = {**ev.decisions["n"], "clear": 470, "zero": 2, "null_zero": 1}
    sampled, *_ = rests_on([_with(section, decisions={"n": close})])
    assert "P(64) = 0.94: 470 of 500 random 64-subsets a decade clear" in sampled
    assert "2 dependent within it (random data: 1) at layer 1: ≤ 1.3% of 64-subsets" in sampled
    sampled, *_ = rests_on([_with(section, decisions={})])
    assert sampled.startswith("P(64) = 1 over 500 random 64-subsets at τ")
    assert sampled.endswith("≤ 0.6% of 64-subsets dependent at τ (95% bound)")


def _with(section, **evidence):
    ev = replace(section.verdicts.evidence, **evidence)
    return replace(section, verdicts=replace(section.verdicts, evidence=ev))


def test_the_answer_and_the_rules_are_reached_from_the_first_screen(stored):
    _, html = stored
    strip = html.index('id="depth-strip"')
    assert html.index('href="#method"', html.index("<main>")) < strip
    assert html.index('class="grant"') > strip  # the grants sit in the strip's rows
    assert "<strong>Grants 757</strong>" in html


def test_limitations_hold_only_limitations(stored):
    context, html = stored
    texts = [lim.text for lim in context.limitations]
    assert not any("input audit" in t or "model variant" in t for t in texts)  # run notes
    assert not any(t.startswith("Not reproduced") for t in texts)  # a finding, in its section
    assert not any("query vectors are identical" in t for t in texts)  # structure, in its card
    assert any("tokenizer substitute" in t for t in texts)
    assert any("are under-trained" in t for t in texts)
    assert f"<b>{len(context.limitations)}</b>limitations detected" in html
    notes = [note.text for note in context.run_notes]
    assert sum(t.startswith("input audit: inputs distinct") for t in notes) == 6
    assert any("authors recipe, code model variant" in t for t in notes)
    card = _layer(context, "vit-b16-random", "0")
    assert (
        card.notes
        and "are identical" in card.notes[0]
        and not any("identical" in t for t in card.limitations)
    )


def test_counts_name_their_unit(stored):
    _, html = stored
    assert "9 of 120 seeds are under-trained" in html
    assert "of 120 seeds memorize more than 10% fewer" in html
    assert not re.search(r"of 120 (settings|series)", html)
    assert not re.search(r"of 26 seeds", html)  # the estimates' rows are settings
    assert "20 of 26 settings undetermined, 6 of 26 settings not limited" in html


def test_every_term_is_linked_to_the_glossary_where_first_used(stored):
    _, html = stored
    body = html[html.index("<main>") :]
    text = re.sub(r"<(?!a class=\"term\")(?!/a>)[^>]+>", " ", body)  # keep only term links
    for key, word in TERMS.items():
        assert f'id="g-{key}"' in html, key
        first = re.search(rf"(?<![\w-]){re.escape(word)}", text)
        assert first is not None, word
        before = text[: first.start()]
        assert before.endswith(f'<a class="term" href="#g-{key}">'), (word, before[-80:])


def test_the_zero_line_is_the_decisions(stored):
    _, html = stored
    text = re.sub(r"<[^>]+>", "", html)
    assert "2·max(δ/c, δaligned) for a set of\n    queries" in text
    assert "≤ 2·δ for a context" in text
    assert "is dependent within the\n    error (the zero line)" not in text


def test_the_kruskal_rank_beside_a_verdict_is_on_its_scale(stored):
    context, html = stored
    close = _layer(context, "dinov2-s14-pretrained", "random_attention")
    assert close.verdicts.kruskal.outcome.value == "too close to call"
    below = "192 sampled, a decade clear: below n = 257, no room shown (not a shortfall)"
    assert close.kruskal_room == below
    # the decade-clear figure, not the within-error one (336 at layer 1): 230 < n
    assert _layer(context, "dinov2-s14-pretrained", "1").kruskal_room.startswith("230 sampled")
    assert close.tau_estimate == "≈ 192 at τ"
    assert "65 short of n" not in html
    room = "449 sampled, a decade clear: 385 above n (an estimate, not a bound)"
    assert _layer(context, "bert-base-random", "1").kruskal_room == room
    assert _layer(context, "vit-b16-random", "0").kruskal_room == "≤ 1 (proved): 196 short of n"
    assert "Kruskal rank at τ ≈ 192" in close.verdicts.kruskal.evidence


def test_a_page_without_the_new_columns_still_renders(stored, tmp_path):
    """Outputs of an earlier extraction and stage (no heads, no estimate at the error)."""
    context, _ = stored
    old = replace(
        context,
        models=[replace(m, H=None, d_h=None) for m in context.models],
        layers=[
            replace(s, verdicts=replace(s.verdicts, evidence=replace(
                s.verdicts.evidence, error_estimate=None, error_estimate_clear=None)))
            for s in context.layers
        ],
    )  # fmt: skip
    html = render_html(TEMPLATE, ctx=old)
    assert "Kruskal rank at the measured error" in html


def test_a_provenance_without_a_position_mechanism_names_none(stored):
    """The stored run names every model's position mechanism; a provenance written before
    position_mechanism renders its model note without one."""
    context, html = stored
    assert context.models and all(m.position_mechanism for m in context.models)
    notes = re.findall(r'<li id="model-\d+">.*?</li>', html, flags=re.S)
    assert len(notes) == len(context.models)
    assert all("positions:" in note for note in notes)
    without = replace(context, models=[replace(m, position_mechanism="") for m in context.models])
    html = render_html(TEMPLATE, ctx=without)
    notes = re.findall(r'<li id="model-\d+">.*?</li>', html, flags=re.S)
    assert not any("positions:" in note for note in notes)


def test_the_paper_a_section_opens_with_the_setup_beside_the_papers(stored):
    context, html = stored
    setup = context.paper_a.setup
    assert setup is not None and setup.columns == ("setting", "paper A", "this run")
    rows = {row[0]: row[1:] for row in setup.rows}
    assert rows["d (token dimension)"] == ("64", "16") and rows["classes"] == ("100", "50")
    assert rows["batch"] == ("256", "full batch")
    section = html[html.index('<section id="paper-a">') :]
    assert section.index("setup beside the paper") < section.index("decided on this run's seeds")
    assert "smaller sizes (d = 16, 50 classes)" in context.paper_a.setup_note
    assert context.paper_b.setup is None  # paper B's section has no such table yet


def test_the_first_screen_names_the_underpowered_laws(stored):
    context, html = stored
    assert context.paper_a.underpowered == [
        "grows with n: shared classification inconclusive at 26% (20 seeds)",
        "saturates in d_h beyond n: shared classification inconclusive at 6% (41 seeds)",
        "linear in H: random classification holds at 71% (6 seeds); shared classification "
        "holds at 56% (8 seeds)",
    ]
    assert len(context.paper_b.underpowered) == 2
    glance = html[html.index('<section id="at-a-glance">') : html.index('id="depth-strip"')]
    assert "Underpowered laws" in glance and "<strong>paper A</strong> grows with n" in glance
    assert "at 26% (20 seeds)" in glance and "<strong>paper B</strong> linear in H" in glance


def test_the_limitations_name_where_the_run_is_not_paper_a_s_setting(stored):
    """Stand-in models, quantized weights, and n and T below paper A's, per model."""
    context, _ = stored
    texts = {lim.where.split(" · ")[0]: lim.text for lim in context.limitations}
    assert texts["smollm2-135m-pretrained"] == (
        "not paper A's setting: stands in for GPT-2-large, paper A's pretrained decoder; 4-bit "
        "weights (Q4_1 GGUF, dequantized to float32); n = 64 against paper A's 1,024; T = 800 "
        "against paper A's 2,000."
    )
    assert texts["dinov2-s14-pretrained"].endswith("T = 400 against paper A's 1,973.")
    assert texts["bert-base-random"] == (
        "not paper A's setting: n = 64 against paper A's 512; T = 800 against paper A's 2,000."
    )
