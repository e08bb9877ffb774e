"""Tag's neighbour search against a brute-force reference (docs/spec-tag.md, Observation: partial
observation).

The k nearest other in-game agents, nearest first by float32 squared distance, ties to the lower
id. Positions on a coarse lattice make exact ties common; flags take agents out of the game.
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.kernels import tag_logic

# numba's pedantic IR check misreads the inlined counters of the search (as kernels/cpu.py notes
# for the game loops, where it is silenced the same way)
pytestmark = pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaIRAssumptionWarning")


@numba.njit  # no disk cache: it would not see edits to tag_logic
def _search_all(x, y, active, k, area):
    """Every in-game agent's neighbours, as the kernels find them (-1 where fewer than k)."""
    n = x.shape[0]
    found = np.full((n, k), -1, np.int32)
    knn_idx = np.zeros(k + n, np.int32)
    d2_row = np.zeros(n, np.float32)
    for i in range(n):
        if active[i]:
            count = tag_logic.nearest_in_game(i, x, y, active, n, k, area, knn_idx, d2_row)
            found[i, :count] = knn_idx[:count]
    return found


def _reference(x, y, active, k):
    n = len(x)
    found = np.full((n, k), -1, np.int32)
    for i in np.flatnonzero(active):
        others = np.array([j for j in range(n) if active[j] and j != i], dtype=np.int64)
        if len(others) == 0:
            continue
        dx, dy = x[others] - x[i], y[others] - y[i]
        d2 = dx * dx + dy * dy  # float32, as the kernels rank them
        order = others[np.lexsort((others, d2))][:k]
        found[i, : len(order)] = order
    return found


@st.composite
def games(draw):
    n = draw(st.integers(2, 40))
    k = draw(st.integers(1, n - 1))
    cells = draw(st.sampled_from([3, 8, 1000]))  # few cells: many exact ties
    length = np.float32(draw(st.sampled_from([1.0, 20.0, 3.0e4])))
    lattice = st.lists(st.integers(0, cells), min_size=n, max_size=n)
    x = np.array(draw(lattice), np.float32) * length / np.float32(cells)
    y = np.array(draw(lattice), np.float32) * length / np.float32(cells)
    active = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return x, y, active, k, length


@settings(max_examples=300, deadline=None)
@given(games())
def test_nearest_in_game_matches_brute_force_ranking(game):
    x, y, active, k, length = game
    found = _search_all(x, y, active, k, np.float32(length * length))
    np.testing.assert_array_equal(found, _reference(x, y, active, k))


def test_every_agent_in_one_spot_orders_by_id():
    n, k = 12, 5
    x = y = np.full(n, 2.5, np.float32)
    found = _search_all(x, y, np.ones(n, np.bool_), k, np.float32(100.0))
    assert found[0].tolist() == [1, 2, 3, 4, 5]
    assert found[7].tolist() == [0, 1, 2, 3, 4]
