"""Memory request of one ``check_assumptions`` job (sized for SLURM and local scheduling).

Kept apart from :mod:`memcap.assumptions` so the Snakefile can size jobs without importing
torch or matplotlib.
"""

from __future__ import annotations

# Resident memory of a check besides its arrays: interpreter, torch, pandas, matplotlib.
BASE_MB = 1000
# The Kruskal search's batched prefix rows (memcap.numerics.sampling.BATCH_BYTES) with slack:
# a constant here, not an import, so sizing a job does not import torch (tested equal).
KRUSKAL_BATCH_MB = 1024
# Largest n * d of one context assumed when sizing context-rank chunks (n = 512, d = 1024).
CONTEXT_MAX_ND = 512 * 1024
MB = 2**20


def check_memory_mb(T: int, context_chunk: int) -> int:
    """MB for one model × layer: the larger of the Kruskal search (its batch buffers with
    slack, and three T × T float64 Gram-sized matrices) and the context-rank check (three
    float64 copies of one chunk of contexts); the two checks run one after the other."""
    kruskal = KRUSKAL_BATCH_MB + 3 * T * T * 8 // MB
    contexts = 3 * context_chunk * CONTEXT_MAX_ND * 8 // MB
    return BASE_MB + max(kruskal, contexts)
