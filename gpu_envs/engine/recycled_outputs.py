"""Fresh output arrays for the CPU step without an allocation per step.

A CPU step with fresh outputs writes each step's outputs into arrays that become the returned
tensors (``torch.from_numpy``). Every tensor, view, NumPy array or autograd record that reaches
such an array holds a reference to it (a tensor's storage keeps the array it was made from), so
when the array's reference count is back to the env's own, nothing outside the env can read it
any more and a later step may write into it again. The tensors handed out are new every step;
only memory that nobody holds is reused, so a caller's tensors keep their values.
"""

from __future__ import annotations

import sys
from collections import deque

import numpy as np


def _reference_counts(arrays: tuple[np.ndarray, ...]) -> list[int]:
    """Each array's reference count, counted the same way for a probe and for a kept step (what
    the interpreter adds while counting, e.g. a borrowed argument on 3.14, is then the same)."""
    return [sys.getrefcount(array) for array in arrays]


class RecycledOutputs:
    """The CPU step's arguments before the actions (``before``) with new output arrays each step.

    Args:
        before: the step loop's arguments before the actions (the env's buffers); the slots of
            ``outputs`` are replaced in every tuple :meth:`take` gives.
        outputs: ``(slot, shape, dtype)`` of each output the step writes completely.
        keep: steps whose arrays are kept for reuse (the newest is the caller's current one).
    """

    def __init__(
        self,
        before: tuple,
        outputs: tuple[tuple[int, tuple[int, ...], np.dtype], ...],
        keep: int = 4,
    ):
        self._template, self._outputs, self._keep = before, outputs, keep
        self._steps: deque[tuple[tuple, tuple[np.ndarray, ...]]] = deque()
        # the counts of a step's arrays that nothing outside the env holds, measured on a probe
        probe = self._new_step()
        self._unheld = _reference_counts(probe[1])

    def _new_step(self) -> tuple[tuple, tuple[np.ndarray, ...]]:
        slots = list(self._template)
        arrays = []
        for slot, shape, dtype in self._outputs:
            slots[slot] = array = np.empty(shape, dtype)
            arrays.append(array)
        del array
        return tuple(slots), tuple(arrays)

    def take(self) -> tuple[tuple, tuple[np.ndarray, ...]]:
        """``(before, arrays)`` for the next step: the oldest kept step's when no array of it is
        held outside the env, else new arrays (and the oldest is forgotten beyond ``keep``)."""
        steps = self._steps
        if len(steps) > 1 and _reference_counts(steps[0][1]) == self._unheld:
            steps.rotate(-1)
            return steps[-1]
        step = self._new_step()
        steps.append(step)
        if len(steps) > self._keep:
            steps.popleft()
        return step
