"""The certified memorization capacity: numerics, and the capacity stage on real embeddings.

Modules: :mod:`~memcap.capacity.certified` (rank(Z) of random or given attention: pure
numerics, also used by the synthetic stage), :mod:`~memcap.capacity.ceiling` (a rank at its
ceiling min(T, H·d) or below it, in words; no torch), :mod:`~memcap.capacity.settings` (the
``capacity`` config section, its checks and the memory estimate; no torch),
:mod:`~memcap.capacity.real` (one extracted model × layer), :mod:`~memcap.capacity.summary`
and :mod:`~memcap.capacity.figures`. Nothing is imported here, so the config checker stays
free of torch.
"""
