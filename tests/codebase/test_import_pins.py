"""What each kind of job imports: a compute module pulls in no plotting stack, pandas or model
zoo it does not use, and the modules the Snakefile imports pull in no torch.

Each check runs in a fresh interpreter: an import is a job's fixed cost, paid once per job.
"""

import subprocess
import sys

import pytest

PLOTTING = ("matplotlib", "seaborn")
ZOOS = ("timm", "transformers", "datasets")
PAGE = ("jinja2",)
STATS = ("scipy.stats",)  # 4–5 s of CPU on a slow machine; only seaborn needs it

PINS = {
    # Numerics: pure functions over arrays.
    "memcap.numerics": PLOTTING + ZOOS + PAGE + STATS + ("pandas",),
    # Certified capacity of real embeddings: tables written by its script.
    "memcap.capacity.real": PLOTTING + ZOOS + PAGE + STATS + ("pandas",),
    # The assumption checks tabulate (pandas) and draw plain Matplotlib figures.
    "memcap.assumptions.checks": PLOTTING + ZOOS + PAGE + STATS,
    "memcap.assumptions.depth": PLOTTING + ZOOS + PAGE + STATS,
    "memcap.assumptions.figures": ("seaborn",) + ZOOS + PAGE + STATS,
    # Training: both papers' sweeps.
    "memcap.training.loop": PLOTTING + ZOOS + PAGE + STATS + ("pandas",),
    "memcap.synthetic.sweep": PLOTTING + ZOOS + PAGE + STATS,
    "memcap.aot.sweep": PLOTTING + ZOOS + PAGE + STATS,
    # Extraction builds a timm model only for a timm architecture (imported there).
    "memcap.extract.job": PLOTTING + ZOOS + PAGE + STATS + ("pandas",),
    # The page reads tables and figures: no torch (seconds of CPU), no numerics' SciPy.
    "memcap.report.assemble": ("torch", "scipy.linalg") + ZOOS + STATS,
}
# Imported by the Snakefile (config checks, job sizes, layout): no torch, no pandas.
SNAKEFILE = (
    "memcap.validation",
    "memcap.extract.entries",
    "memcap.extract.depth",
    "memcap.extract.memory",
    "memcap.extract.store",
    "memcap.extract.weights",
    "memcap.assumptions.memory",
    "memcap.capacity.settings",
    "memcap.synthetic.settings",
    "memcap.synthetic.checks",
    "memcap.aot.settings",
    "memcap.report.layout",
)


def _imported(module: str, names: tuple[str, ...]) -> list[str]:
    code = f"import sys, {module}; print(','.join(n for n in {names!r} if n in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return [name for name in result.stdout.strip().split(",") if name]


@pytest.mark.parametrize("module", sorted(PINS))
def test_compute_module_imports_only_what_it_uses(module):
    assert _imported(module, PINS[module]) == []


@pytest.mark.parametrize("module", SNAKEFILE)
def test_snakefile_modules_import_no_torch(module):
    assert _imported(module, ("torch", "pandas") + PLOTTING + ZOOS) == []
