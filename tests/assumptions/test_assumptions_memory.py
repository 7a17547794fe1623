"""The memory request of check_assumptions: sized from T and the context chunk, no torch."""

import subprocess
import sys

from memcap.assumptions.memory import BASE_MB, KRUSKAL_BATCH_MB, MB, check_memory_mb
from memcap.numerics.sampling import BATCH_BYTES


def test_kruskal_buffers_follow_the_search_batch_size():
    assert KRUSKAL_BATCH_MB == 4 * BATCH_BYTES // MB


def test_gram_matrices_dominate_for_large_T_and_contexts_for_small():
    small = check_memory_mb(48, 16)
    assert small == BASE_MB + max(KRUSKAL_BATCH_MB, 3 * 16 * 512 * 1024 * 8 // MB)
    big = check_memory_mb(20_000, 64)
    assert big == BASE_MB + KRUSKAL_BATCH_MB + 3 * 20_000**2 * 8 // MB
    assert check_memory_mb(800, 64) < check_memory_mb(2000, 64) < big


def test_sizing_a_job_does_not_import_torch():
    code = "import sys, memcap.assumptions.memory; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
