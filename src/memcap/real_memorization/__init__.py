"""Theorem 1 on real embeddings: paper A's attention layer trained on the frozen examples of an
extracted layer, beside i.i.d. controls of the same shape (issue "grants" → "achieved").

The model, the recipe and the capacity protocol are the synthetic stage's
(:func:`memcap.synthetic.sweep.run_sweep`); this package chooses the examples
(:mod:`~memcap.real_memorization.inputs`), sets the stage up for one layer
(:mod:`~memcap.real_memorization.settings`), trains it (:mod:`~memcap.real_memorization.train`)
and reads the results (:mod:`~memcap.real_memorization.summary`,
:mod:`~memcap.real_memorization.figures`).
"""
