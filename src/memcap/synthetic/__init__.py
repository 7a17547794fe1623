"""Paper A: memorization capacity of one multi-head attention layer, on synthetic data.

Modules (named as in :mod:`memcap.aot` where both papers have one):

- :mod:`~memcap.synthetic.settings`: sweep and stage settings, replicas, the ladder and the
  convergence check as configured, which replicas share a batched model, the memory estimate
  (no torch).
- :mod:`~memcap.synthetic.checks`: the ``synthetic`` section's cross-field checks (no torch).
- :mod:`~memcap.synthetic.cut`: a job per sweep or per setting, and the setting ids (no torch).
- :mod:`~memcap.synthetic.buckets`: the training step's cost model and cost-model buckets.
- :mod:`~memcap.synthetic.tasks`: uniform queries and contexts, random labels.
- :mod:`~memcap.synthetic.model`: the replica-batched MHA model, its forward folded: what
  trains.
- :mod:`~memcap.synthetic.series`: the protocol: every series up its T ladder, restarts, the
  convergence check, and what a series reports (no torch).
- :mod:`~memcap.synthetic.sweep`: training a sweep: a group of replicas as one batched model
  and its data, trained through :func:`memcap.training.loop.train_replicas`; warm starts
  between batched models.
- :mod:`~memcap.synthetic.results`: what a trained replica reports: its row, certified.
- :mod:`~memcap.synthetic.summary`: capacity, fit and saturation tables.
- :mod:`~memcap.synthetic.laws`: paper A's three laws checked.
- :mod:`~memcap.synthetic.bounds`: the linear fit (H(n−1)+1 is :mod:`memcap.theory`).
- :mod:`~memcap.synthetic.figures`: the stage's figures.

Nothing is imported here, so the config checker stays free of torch.
"""
