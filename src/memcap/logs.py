"""Send a rule's logging, warnings and progress bars to its Snakemake log file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup_logging(log_path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Redirect stderr (tqdm, warnings, tracebacks) and the ``memcap`` logger to ``log_path``."""
    stream = open(log_path, "w", buffering=1)  # noqa: SIM115 - lives as long as the job
    sys.stderr = stream
    logging.basicConfig(
        stream=stream,
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    logging.captureWarnings(True)
    return logging.getLogger("memcap")
