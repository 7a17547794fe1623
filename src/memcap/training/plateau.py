"""Whether a replica was still learning when its step budget ran out: its loss's late fall.

Pure numpy (the summaries import it without torch). A replica's own loss curve is the prefix
of the loop's ``loss_curve`` up to its last evaluation: replicas leave a batched model
(fitted, or no longer learning at the end of a budget) and never come back.
"""

from __future__ import annotations

import numpy as np

# Fall of the training loss over the last fifth of a replica's evaluations above which it
# counts as still learning: an unfitted replica beyond it is under-trained (more steps would
# likely have memorized more), and trains another budget where extra rounds are allowed.
STILL_FALLING = 0.05
TAIL = 0.2


def late_loss_drop(
    curve: np.ndarray, evaluations: np.ndarray | None = None, tail: float = TAIL
) -> np.ndarray:
    """(R,) relative fall of each replica's training loss over the last ``tail`` of its
    evaluations.

    Args:
        curve: (rows, R) training loss: the initial evaluation, then one row per evaluation.
        evaluations: (R,) evaluations each replica took part in (its curve is
            ``curve[: evaluations[r] + 1, r]``); None: every row.
        tail: fraction of the evaluations that counts as late.
    """
    curve = np.asarray(curve)
    replicas = curve.shape[1]
    last = np.full(replicas, len(curve) - 1) if evaluations is None else np.asarray(evaluations)
    first = np.rint((1.0 - tail) * last).astype(int)  # half to even, as round() does
    start, end = curve[first, np.arange(replicas)], curve[last, np.arange(replicas)]
    return np.where(start > 0, (start - end) / np.maximum(start, 1e-12), 0.0)


def still_learning(curve: np.ndarray, evaluations: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """(R,) True for replicas that have not fitted and whose loss still fell by more than
    :data:`STILL_FALLING` over the last fifth of their evaluations."""
    return ~np.asarray(fitted, dtype=bool) & (late_loss_drop(curve, evaluations) > STILL_FALLING)
