r"""Tag (continuous arena) step logic, written once for every target.

The functions here are ``targets.kernel_function``s: the CPU driver (njit) and the CUDA kernel each
compile them for their own target, and the CUDA simulator runs them as Python. :func:`step_envs`
and :func:`reset_envs` are the whole step and reset of a batch of envs, for both drivers. Each env's
agents are seen through 1-D arrays of length N (``x, y, heading, speed, acc, active``) that
``targets.env_rows`` gives: rows of the global state on the CPU, copies in shared memory on CUDA.
A step is four phases over the agents, with a ``targets.barrier`` between phases (docs/spec-tag.md,
One step):

1. :func:`move_agent` (acceleration, heading wrap, speed clip, move, walls; returns the base
   reward),
2. :func:`select_neighbours` (partial observation: the k nearest) and :func:`observe_agent`
   (observation from the moved state and the in-game flags before the tags),
3. :func:`tagger_in_reach` + :func:`tag_runner` for each runner in the game (the tagger's credit
   and the count of runners left are ``targets.atomic_add``\ s),
4. :func:`finalize_reward` (tag rewards of taggers, end-of-game bonus of runners).

Every float is float32 as docs/spec-tag.md (Numerics) says. cos/sin/fmod are taken in float64 and
rounded to float32: each backend's float64 cos/sin is within an ulp of the true value, so the
rounded float32 results agree between the CPU and a GPU (float32 ``cosf`` differs between libm and
libdevice in the last bit, and positions would drift apart). sqrt is float32 (correctly rounded
everywhere, the same bits as the float64 sqrt rounded). Every product that feeds a position, a
squared distance or a reward is a :func:`~gpu_envs.kernels.rounding.mul_rn`: the CUDA compiler
cannot fuse it into an FMA, so a GPU computes the same bits as the CPU and the neighbour order and
the tags agree by construction (``.ci/ptx_check.py`` asserts no float32 FMA in Tag's kernels).
Parameters come in two arrays built by :func:`make_consts` (float32 ``float_consts`` and int64
``int_consts``) so that one compilation serves every configuration, and no untyped literal can
change a result between targets.
"""

from __future__ import annotations

import collections
import math

import numba
import numpy as np

from gpu_envs.kernels.autoreset import NEXT_STEP, SAME_STEP
from gpu_envs.kernels.rng import uniform01
from gpu_envs.kernels.rounding import mul_rn
from gpu_envs.kernels.targets import (
    agent_start,
    agent_stride,
    atomic_add,
    barrier,
    env_rows,
    fmod,
    kernel_function,
    sqrt,
    store_env_rows,
)

# Layout of the float32 constants ``float_consts``.
(
    GRID_LENGTH,
    CAP_TAGGER,
    CAP_RUNNER,
    MAX_SPEED,
    EDGE_PENALTY,
    TAGGER_STEP,
    RUNNER_STEP,
    TAG_REWARD,
    TAG_PENALTY,
    END_REWARD,
    TAG_MARGIN,
    POS_NORM,
    SPEED_NORM,
    TWO_PI,
) = range(14)
NUM_FLOAT_CONSTS = 14

# Layout of the int64 constants ``int_consts``.
(NUM_TAGGERS, NUM_AGENTS, EPISODE_LENGTH, NUM_OBSERVED, FULL_OBS, RUNNER_EXITS, OBSERVE_SELF) = (
    range(7)
)
NUM_INT_CONSTS = 7

#: Features per observed agent (the seven blocks) and per own-state block (observe_self).
OTHER_FEATURES = 7
SELF_FEATURES = 5
#: Draws per agent at a reset: x, y, heading (RNG indices 3a, 3a+1, 3a+2).
DRAWS_PER_AGENT = 3

TWO_PI_32 = np.float32(2.0 * math.pi)
_HALF_PI = np.float64(0.5 * math.pi)
_TWO_POW_24 = np.float64(16777216.0)
_TWO_POW_MINUS_24 = np.float64(1.0 / 16777216.0)
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_INF = np.float32(np.inf)
_HALF = np.float32(0.5)
_FOUR = np.float32(4.0)
_THREE_QUARTERS = np.float32(0.75)


# --------------------------------------------------------------------------------- host set-up
def action_levels(low: float, high: float, levels: int) -> np.ndarray:
    """The action table ``[0.0, level_0, ..., level_{levels-1}]`` (float32), index 0 = no change.

    The levels are ``np.linspace(float32(low), float32(high), levels)`` as NumPy 2 computes it:
    ``step = float32(hi - lo) / (levels - 1)`` and ``level[m] = float32(m) * step + lo``, all in
    float32, with the last level exactly ``hi`` (one level: ``lo``).
    """
    lo, hi = np.float32(low), np.float32(high)
    table = np.zeros(levels + 1, dtype=np.float32)
    if levels == 1:
        table[1] = lo
    elif levels > 1:
        step = np.float32(hi - lo) / np.float32(levels - 1)
        for m in range(levels):
            table[1 + m] = np.float32(np.float32(m) * step) + lo
        table[levels] = hi
    return table


def observation_size(
    num_agents: int, use_full_observation: bool, num_other_agents_observed: int, observe_self: bool
) -> int:
    """Length of one agent's observation: 7 blocks over the others, t/T, and the own-state block."""
    columns = num_agents - 1 if use_full_observation else num_other_agents_observed
    return OTHER_FEATURES * columns + 1 + (SELF_FEATURES if observe_self else 0)


def make_consts(params) -> tuple[np.ndarray, np.ndarray]:
    """``(float_consts, int_consts)``: the float32 and int64 constants of a
    :class:`gpu_envs.games.tag.env.TagParams`."""
    float_consts = np.zeros(NUM_FLOAT_CONSTS, dtype=np.float32)
    length = np.float32(params.grid_length)
    float_consts[GRID_LENGTH] = length
    float_consts[CAP_TAGGER] = np.float32(params.max_speed * params.skill_level_tagger)
    float_consts[CAP_RUNNER] = np.float32(params.max_speed * params.skill_level_runner)
    float_consts[MAX_SPEED] = np.float32(params.max_speed)
    float_consts[EDGE_PENALTY] = params.edge_hit_penalty
    float_consts[TAGGER_STEP] = params.step_penalty_for_tagger
    float_consts[RUNNER_STEP] = params.step_reward_for_runner
    float_consts[TAG_REWARD] = params.tag_reward_for_tagger
    float_consts[TAG_PENALTY] = params.tag_penalty_for_runner
    float_consts[END_REWARD] = params.end_of_game_reward_for_runner
    float_consts[TAG_MARGIN] = np.float32(params.tagging_distance) * length
    float_consts[POS_NORM] = np.float32(math.sqrt(2.0) * params.grid_length)
    float_consts[SPEED_NORM] = np.float32(params.max_speed + 1e-10)
    float_consts[TWO_PI] = TWO_PI_32
    int_consts = np.zeros(NUM_INT_CONSTS, dtype=np.int64)
    int_consts[NUM_TAGGERS] = params.num_taggers
    int_consts[NUM_AGENTS] = params.num_taggers + params.num_runners
    int_consts[EPISODE_LENGTH] = params.episode_length
    int_consts[NUM_OBSERVED] = params.num_other_agents_observed
    int_consts[FULL_OBS] = params.use_full_observation
    int_consts[RUNNER_EXITS] = params.runner_exits_game_after_tagged
    int_consts[OBSERVE_SELF] = params.observe_self
    return float_consts, int_consts


# --------------------------------------------------------------------------------- start state
@kernel_function
def uniform_below(seed, episode, index, upper):
    """A float32 uniform in [0, upper): 24 random bits times ``upper`` (never rounds up to it)."""
    u = uniform01(seed, episode, index)
    u24 = np.float32(np.float64(math.floor(u * _TWO_POW_24)) * _TWO_POW_MINUS_24)
    return u24 * upper


@kernel_function
def reset_agent(
    a, seed, episode, x, y, heading, speed, acc, active, start, start_given, float_consts
):
    """Agent ``a``'s start state: drawn from (seed, episode), or ``start[:, a]`` where given.

    Draws: x, y uniform in [0, L), heading from {0, pi/2, pi, 3pi/2}; speed and acceleration 0,
    in the game. ``start_given[q]`` says whether ``start[q]`` (q = x, y, heading) replaces the draw.
    """
    base = np.uint64(DRAWS_PER_AGENT * a)
    if start_given[0]:
        x[a] = start[0, a]
    else:
        x[a] = uniform_below(seed, episode, base, float_consts[GRID_LENGTH])
    if start_given[1]:
        y[a] = start[1, a]
    else:
        y[a] = uniform_below(seed, episode, base + np.uint64(1), float_consts[GRID_LENGTH])
    if start_given[2]:
        heading[a] = start[2, a]
    else:
        quarter = math.floor(uniform01(seed, episode, base + np.uint64(2)) * np.float64(4.0))
        heading[a] = np.float32(np.float64(quarter) * _HALF_PI)
    speed[a] = _ZERO
    acc[a] = _ZERO
    active[a] = True


# --------------------------------------------------------------------------------- phase 1: move
@kernel_function
def wrap_heading(value, two_pi):
    """``value mod 2pi`` in float32 with NumPy's ``%`` semantics; result in [0, float32(2pi)]."""
    r = np.float32(fmod(np.float64(value), np.float64(two_pi)))
    if r < _ZERO:
        r = r + two_pi
    elif r == _ZERO:
        r = _ZERO  # NumPy returns +0.0 for an exact multiple (fmod may give -0.0)
    return r


@kernel_function
def move_agent(
    a,
    x,
    y,
    heading,
    speed,
    acc,
    active,
    acc_index,
    turn_index,
    acc_table,
    turn_table,
    float_consts,
    int_consts,
):
    """Phase 1 for agent ``a``: returns ``(base_reward, bad_index)``.

    ``base_reward`` is the edge penalty (if it hit a wall) plus its step term, 0 out of the game.
    ``bad_index`` is True when an action index is outside its table: the index then acts as 0
    (no change) so that nothing is read out of bounds; the env reports it (never silently).
    """
    bad_index = False
    if acc_index < 0 or acc_index >= acc_table.shape[0]:
        bad_index = True
        acc_index = 0
    if turn_index < 0 or turn_index >= turn_table.shape[0]:
        bad_index = True
        turn_index = 0
    if not active[a]:
        heading[a] = _ZERO
        speed[a] = _ZERO
        acc[a] = _ZERO
        return _ZERO, bad_index
    is_tagger = a < int_consts[NUM_TAGGERS]
    cap = float_consts[CAP_TAGGER] if is_tagger else float_consts[CAP_RUNNER]
    new_acc = acc[a] + acc_table[acc_index]
    new_heading = wrap_heading(heading[a] + turn_table[turn_index], float_consts[TWO_PI])
    new_speed = speed[a] + new_acc
    if new_speed < _ZERO:
        new_speed = _ZERO
    if new_speed > cap:
        new_speed = cap
    if new_speed <= _ZERO or new_speed >= cap:
        new_acc = _ZERO
    cos_h = np.float32(math.cos(np.float64(new_heading)))
    sin_h = np.float32(math.sin(np.float64(new_heading)))
    new_x = x[a] + mul_rn(new_speed, cos_h)
    new_y = y[a] + mul_rn(new_speed, sin_h)
    length = float_consts[GRID_LENGTH]
    hit_edge = new_x < _ZERO or new_x > length or new_y < _ZERO or new_y > length
    if hit_edge:
        new_x = min(max(new_x, _ZERO), length)
        new_y = min(max(new_y, _ZERO), length)
    x[a] = new_x
    y[a] = new_y
    heading[a] = new_heading
    speed[a] = new_speed
    acc[a] = new_acc
    step_term = float_consts[TAGGER_STEP] if is_tagger else float_consts[RUNNER_STEP]
    if hit_edge:
        return float_consts[EDGE_PENALTY] + step_term, bad_index
    return step_term, bad_index


# --------------------------------------------------------------------------------- phase 2: observe
@kernel_function
def squared_distance32(i, j, x, y):
    """``dx*dx + dy*dy`` in float32: the key that ranks nearness (ties go to the lower id)."""
    dx = x[j] - x[i]
    dy = y[j] - y[i]
    return mul_rn(dx, dx) + mul_rn(dy, dy)


@kernel_function
def _distance_row(i, x, y, active, num_agents, d2_row):
    """Fill ``d2_row[j]`` with the float32 squared distance from ``i`` to each in-game agent
    ``j != i`` (+inf for the others); returns how many of them are finite."""
    xi = x[i]
    yi = y[i]
    finite = 0
    for j in range(num_agents):
        dx = x[j] - xi
        dy = y[j] - yi
        d2 = mul_rn(dx, dx) + mul_rn(dy, dy) if active[j] & (j != i) else _INF
        d2_row[j] = d2
        finite += d2 < _INF
    return finite


@kernel_function
def _count_below(d2_row, num_agents, bound):
    """How many entries of ``d2_row`` are below ``bound`` (a branch-free count the compiler
    vectorises)."""
    below = 0
    for j in range(num_agents):
        below += d2_row[j] < bound
    return below


@kernel_function
def _bound_with_k_below(d2_row, num_agents, k, in_reach, area):
    """A squared distance with at least ``k`` (and, where the row allows, at most ``k + k // 4``)
    entries of ``d2_row`` below it; +inf when ``in_reach <= k``.

    A first guess from the density ``in_reach / area``, multiplied by 4 until ``k`` are below,
    halved while more than ``2k`` stay below, then shrunk by 3/4 at most twice (fewer candidates
    to rank). Each step is one branch-free count.
    """
    if in_reach <= k:
        return _INF
    bound = np.float32(k + k // 2) * area / np.float32(in_reach)
    below = _count_below(d2_row, num_agents, bound)
    while below < k:  # ends: in_reach > k finite distances are below +inf
        bound = bound * _FOUR
        below = _count_below(d2_row, num_agents, bound)
    while below > 2 * k:
        half = bound * _HALF
        below_half = _count_below(d2_row, num_agents, half)
        if below_half < k:  # ends at the latest when half underflows to 0
            break
        bound = half
        below = below_half
    for _ in range(2):
        if below <= k + k // 4:
            break
        smaller = bound * _THREE_QUARTERS
        below_smaller = _count_below(d2_row, num_agents, smaller)
        if below_smaller < k:
            break
        bound = smaller
        below = below_smaller
    return bound


@kernel_function
def _gather_below(d2_row, num_agents, bound, knn_idx, first):
    """Move the distances below ``bound`` to the front of ``d2_row`` (ascending id, branch-free)
    and their ids to ``knn_idx[first:]``; returns how many there are."""
    count = 0
    for j in range(num_agents):  # writes at ``count <= j``: no unread entry is overwritten
        d2 = d2_row[j]
        d2_row[count] = d2
        knn_idx[first + count] = j
        count += d2 < bound
    return count


@kernel_function
def _place_by_rank(candidates, k, d2_row, knn_idx):
    """``knn_idx[:k]``: the ids (at ``knn_idx[k:]``) of the ``k`` nearest ``candidates``, nearest
    first, ties to the lower id.

    A candidate's place is its rank: how many candidates come before it (a smaller distance, or an
    equal one and a lower id, i.e. an earlier place in the ascending gather). Branch-free.
    """
    for a in range(candidates):
        d2 = d2_row[a]
        rank = 0
        for b in range(candidates):
            other = d2_row[b]
            rank += (other < d2) | ((other == d2) & (b < a))
        if rank < k:
            knn_idx[rank] = knn_idx[k + a]


@kernel_function(inline=False)
def nearest_in_game(i, x, y, active, num_agents, k, area, knn_idx, d2_row):
    """The up-to-``k`` nearest other in-game agents of ``i``, nearest first, ties to the lower id;
    returns how many were found (their ids in ``knn_idx[:k]``).

    1. ``d2_row``: the squared distance to every agent (one vectorised pass; +inf for ``i`` and
       agents out of the game).
    2. A bound with at least ``k`` (typically k to 1.25k) candidates below it, by branch-free
       counts over the row. The ``k`` nearest are all below it.
    3. The candidates below the bound gathered in ascending id order, and each put at its rank
       among them (no sort, no data-dependent branch but the count loops).

    ``knn_idx`` has room for ``k + num_agents`` ids (the candidates after the first ``k``). With
    fewer than ``k + 1`` candidates the bound is +inf. A distance that is not finite (only from a
    NaN or infinite position, which validated parameters rule out) is never observed.
    """
    in_reach = _distance_row(i, x, y, active, num_agents, d2_row)
    bound = _bound_with_k_below(d2_row, num_agents, k, in_reach, area)
    candidates = _gather_below(d2_row, num_agents, bound, knn_idx, k)
    _place_by_rank(candidates, k, d2_row, knn_idx)
    return min(candidates, k)


@kernel_function
def _write_relative(obs_row, columns, c, i, j, x, y, heading, speed, acc, float_consts):
    """Blocks 0-4 of column ``c``: agent ``j`` relative to agent ``i``, normalised."""
    obs_row[c] = (x[j] - x[i]) / float_consts[POS_NORM]
    obs_row[columns + c] = (y[j] - y[i]) / float_consts[POS_NORM]
    obs_row[2 * columns + c] = (speed[j] - speed[i]) / float_consts[SPEED_NORM]
    obs_row[3 * columns + c] = (acc[j] - acc[i]) / float_consts[SPEED_NORM]
    obs_row[4 * columns + c] = (heading[j] - heading[i]) / float_consts[TWO_PI]


@kernel_function
def _zero_relative(obs_row, columns, c):
    for block in range(5):
        obs_row[block * columns + c] = _ZERO


@kernel_function
def select_neighbours(i, x, y, active, knn_idx, d2_row, float_consts, int_consts):
    """The neighbours agent ``i`` observes in partial mode: their count, ids in ``knn_idx``.

    0 in full mode and when ``i`` is out of the game.
    """
    if int_consts[FULL_OBS] != 0 or not active[i]:
        return 0
    length = float_consts[GRID_LENGTH]
    return nearest_in_game(
        i,
        x,
        y,
        active,
        int_consts[NUM_AGENTS],
        int_consts[NUM_OBSERVED],
        length * length,
        knn_idx,
        d2_row,
    )


@kernel_function
def observe_agent(
    i, x, y, heading, speed, acc, active, t, obs_row, found, knn_idx, float_consts, int_consts
):
    """Phase 2: write agent ``i``'s observation at time ``t`` into ``obs_row`` (docs/spec-tag.md,
    Observation).

    Layout: seven blocks of one value per observed column (block b of column c at
    ``b * columns + c``), then ``t/T``, then the own-state block when observe_self. ``active``
    holds the flags before this step's tags. Partial mode observes the ``found`` agents of
    ``knn_idx`` that :func:`select_neighbours` chose (full mode ignores both).
    """
    num_agents = int_consts[NUM_AGENTS]
    num_taggers = int_consts[NUM_TAGGERS]
    full = int_consts[FULL_OBS] != 0
    columns = num_agents - 1 if full else int_consts[NUM_OBSERVED]
    in_game = active[i]
    if full:
        for j in range(num_agents):
            if j == i:
                continue
            c = j if j < i else j - 1
            if in_game:
                _write_relative(obs_row, columns, c, i, j, x, y, heading, speed, acc, float_consts)
            else:
                _zero_relative(obs_row, columns, c)
            obs_row[5 * columns + c] = _ONE if j < num_taggers else _ZERO
            obs_row[6 * columns + c] = _ONE if active[j] else _ZERO
    else:
        for c in range(found):
            j = knn_idx[c]
            _write_relative(obs_row, columns, c, i, j, x, y, heading, speed, acc, float_consts)
            obs_row[5 * columns + c] = _ONE if j < num_taggers else _ZERO
            obs_row[6 * columns + c] = _ONE
        for c in range(found, columns):
            for block in range(OTHER_FEATURES):
                obs_row[block * columns + c] = _ZERO
    time_slot = OTHER_FEATURES * columns
    if in_game:
        obs_row[time_slot] = np.float32(t) / np.float32(int_consts[EPISODE_LENGTH])
    else:
        obs_row[time_slot] = _ZERO
    if int_consts[OBSERVE_SELF] != 0:
        own_type = _ONE if i < num_taggers else _ZERO
        if in_game:
            obs_row[time_slot + 1] = x[i] / float_consts[GRID_LENGTH]
            obs_row[time_slot + 2] = y[i] / float_consts[GRID_LENGTH]
            obs_row[time_slot + 3] = speed[i] / float_consts[MAX_SPEED]
            obs_row[time_slot + 4] = heading[i] / float_consts[TWO_PI]
            obs_row[time_slot + 5] = own_type
        else:
            for s in range(1, SELF_FEATURES):
                obs_row[time_slot + s] = _ZERO
            # Full mode keeps the type entries of an agent out of the game; partial zeroes all.
            obs_row[time_slot + 5] = own_type if full else _ZERO


# --------------------------------------------------------------------------------- phase 3: tags
@kernel_function
def tagger_in_reach(r, x, y, float_consts, int_consts):
    """The tagger that tags runner ``r`` this step, or -1.

    Its nearest tagger (smallest float32 squared distance, ties to the lower id), if its float32
    distance (the correctly rounded float32 sqrt: the float64 sqrt rounded) is strictly below
    ``float32(tagging_distance) * float32(L)``.
    """
    best = 0
    best_d2 = squared_distance32(r, 0, x, y)
    for k in range(1, int_consts[NUM_TAGGERS]):
        d2 = squared_distance32(r, k, x, y)
        if d2 < best_d2:
            best_d2 = d2
            best = k
    if sqrt(best_d2) < float_consts[TAG_MARGIN]:
        return best
    return -1


@kernel_function
def tag_runner(r, speed, acc, active, rewards, tag_count, float_consts, int_consts):
    """Runner ``r`` was tagged: its penalty, its tag mark, and its exit (frozen, speed 0)."""
    rewards[r] = rewards[r] + float_consts[TAG_PENALTY]
    tag_count[r] = 1
    if int_consts[RUNNER_EXITS] != 0:
        active[r] = False
        speed[r] = _ZERO
        acc[r] = _ZERO


# --------------------------------------------------------------------------------- phase 4: finish
@kernel_function
def finalize_reward(a, rewards, tag_count, active, at_end, float_consts, int_consts):
    """Phase 4: a tagger adds ``count * tag_reward``; a runner still in at t == T its bonus."""
    if a < int_consts[NUM_TAGGERS]:
        count = tag_count[a]
        if count > 0:
            rewards[a] = rewards[a] + mul_rn(np.float32(count), float_consts[TAG_REWARD])
    elif at_end and active[a]:
        rewards[a] = rewards[a] + float_consts[END_REWARD]


# --------------------------------------------------------------------------------- one env's step
#: The kernels' arguments (``envs``): the buffers of ``TagEnv.buffer_layout`` in order, the
#: actions, the constants (``acc_table``, ``turn_table``, ``start_state``, ``start_given``,
#: ``float_consts``, ``int_consts``) and the autoreset setting.
KernelArgs = collections.namedtuple(
    "KernelArgs",
    "x y heading speed acceleration active t needs_reset episode env_seed obs rewards terminated"
    " truncated final_obs final_active has_final_obs tag_count action_error knn_idx d2_row"
    " runners_left actions acc_table turn_table start_state start_given float_consts int_consts"
    " autoreset_mode",
)

#: One env's agents as its phases work on them (``targets.env_rows``: shared memory on CUDA).
Agents = collections.namedtuple("Agents", "x y heading speed acc active")

# A worker (the CPU thread of an env, or a CUDA thread) handles the agents ``agent_start(),
# agent_start() + agent_stride(), ...``; ``barrier`` separates the phases.


@kernel_function
def _env_agents(e, envs):
    """Env ``e``'s agents as :func:`~gpu_envs.kernels.targets.env_rows` gives them (the caller
    then calls ``barrier``)."""
    return Agents(
        env_rows(envs.x[e], 0),
        env_rows(envs.y[e], 1),
        env_rows(envs.heading[e], 2),
        env_rows(envs.speed[e], 3),
        env_rows(envs.acceleration[e], 4),
        env_rows(envs.active[e], 5),
    )


@kernel_function
def _store_agents(e, agents, envs):
    """Write env ``e``'s agents back where :func:`_env_agents` read them."""
    store_env_rows(envs.x[e], agents.x)
    store_env_rows(envs.y[e], agents.y)
    store_env_rows(envs.heading[e], agents.heading)
    store_env_rows(envs.speed[e], agents.speed)
    store_env_rows(envs.acceleration[e], agents.acc)
    store_env_rows(envs.active[e], agents.active)


@kernel_function(inline=False)
def _observe_all(e, t, agents, envs):
    """Every agent's observation of env ``e`` at time ``t`` (each worker its own kNN scratch
    row)."""
    slot = min(agent_start(), envs.knn_idx.shape[1] - 1)
    knn_idx, d2_row = envs.knn_idx[e, slot], envs.d2_row[e, slot]
    float_consts, int_consts = envs.float_consts, envs.int_consts
    x, y, active = agents.x, agents.y, agents.active
    for a in range(agent_start(), int_consts[NUM_AGENTS], agent_stride()):
        found = select_neighbours(a, x, y, active, knn_idx, d2_row, float_consts, int_consts)
        observe_agent(
            a,
            x,
            y,
            agents.heading,
            agents.speed,
            agents.acc,
            active,
            t,
            envs.obs[e, a],
            found,
            knn_idx,
            float_consts,
            int_consts,
        )


@kernel_function(inline=False)
def _reset_game(e, agents, envs):
    """Start env ``e``'s next episode: agents drawn from (seed, episode), observations at t = 0."""
    seed = envs.env_seed[e]
    episode = envs.episode[e]
    for a in range(agent_start(), envs.int_consts[NUM_AGENTS], agent_stride()):
        reset_agent(
            a,
            seed,
            episode,
            agents.x,
            agents.y,
            agents.heading,
            agents.speed,
            agents.acc,
            agents.active,
            envs.start_state,
            envs.start_given,
            envs.float_consts,
        )
        envs.tag_count[e, a] = 0
    barrier()
    _observe_all(e, 0, agents, envs)
    if agent_start() == 0:
        envs.episode[e] = episode + np.uint64(1)
        envs.t[e] = 0
        envs.needs_reset[e] = False


@kernel_function(inline=False)
def _advance_game(e, agents, envs):
    """The four phases of env ``e``'s step and its end of game; returns whether the game ended
    (the same for every worker of the env)."""
    float_consts, int_consts = envs.float_consts, envs.int_consts
    n = int_consts[NUM_AGENTS]
    first = agent_start()
    stride = agent_stride()
    t_new = envs.t[e] + 1
    rewards, tag_count = envs.rewards[e], envs.tag_count[e]
    for a in range(first, n, stride):
        reward, bad = move_agent(
            a,
            agents.x,
            agents.y,
            agents.heading,
            agents.speed,
            agents.acc,
            agents.active,
            envs.actions[e, a, 0],
            envs.actions[e, a, 1],
            envs.acc_table,
            envs.turn_table,
            float_consts,
            int_consts,
        )
        rewards[a] = reward
        tag_count[a] = 0
        if bad:
            envs.action_error[e] = True
    if first == 0:
        envs.runners_left[e] = 0
    barrier()
    _observe_all(e, t_new, agents, envs)
    barrier()
    active = agents.active
    for r in range(int_consts[NUM_TAGGERS] + first, n, stride):
        if active[r]:
            tagger = tagger_in_reach(r, agents.x, agents.y, float_consts, int_consts)
            if tagger >= 0:
                atomic_add(tag_count, tagger, 1)
                tag_runner(
                    r,
                    agents.speed,
                    agents.acc,
                    active,
                    rewards,
                    tag_count,
                    float_consts,
                    int_consts,
                )
            if active[r]:
                atomic_add(envs.runners_left, e, 1)
    barrier()
    at_end = t_new >= int_consts[EPISODE_LENGTH]
    done = at_end or envs.runners_left[e] == 0
    same_step = envs.autoreset_mode == SAME_STEP
    for a in range(first, n, stride):
        finalize_reward(a, rewards, tag_count, active, at_end, float_consts, int_consts)
        if same_step and done:
            for d in range(envs.obs.shape[2]):
                envs.final_obs[e, a, d] = envs.obs[e, a, d]
            envs.final_active[e, a] = active[a]
    if first == 0:
        envs.t[e] = t_new
        envs.terminated[e] = done
        envs.truncated[e] = False
        envs.needs_reset[e] = done
        if same_step:
            envs.has_final_obs[e] = done
    return done


@kernel_function
def step_envs(start, stop, envs):
    """Advance envs ``start..stop-1`` by one step under ``envs.autoreset_mode``.

    A finished env is reset instead (NEXT_STEP: actions ignored, rewards 0) or left frozen with
    rewards 0 (DISABLED: stepping a finished env anyway).
    """
    for e in range(start, stop):
        agents = _env_agents(e, envs)
        barrier()
        if envs.needs_reset[e]:  # the same for every worker of the env
            if envs.autoreset_mode == NEXT_STEP:
                _reset_game(e, agents, envs)
                if agent_start() == 0:
                    envs.terminated[e] = False
            for a in range(agent_start(), envs.int_consts[NUM_AGENTS], agent_stride()):
                envs.rewards[e, a] = _ZERO
            if agent_start() == 0:
                envs.truncated[e] = False
        else:
            done = _advance_game(e, agents, envs)
            if envs.autoreset_mode == SAME_STEP and done:
                barrier()
                _reset_game(e, agents, envs)
        barrier()
        _store_agents(e, agents, envs)


@kernel_function
def reset_envs(start, stop, mask, envs):
    """Start the next episode of the envs ``e`` in ``start..stop-1`` where ``mask[e]``."""
    for e in range(start, stop):
        if mask[e]:  # the same for every worker of the env
            agents = _env_agents(e, envs)
            barrier()
            _reset_game(e, agents, envs)
            barrier()
            _store_agents(e, agents, envs)


#: ``env_rows`` slots the CUDA kernel keeps per env in shared memory: x, y, heading, speed,
#: acceleration, in-game flag.
SHARED_SLOTS = 6


@numba.njit(cache=True, error_model="numpy")
def _draw_start(seed, start_state, float_consts):
    n = start_state.shape[1]
    given = np.zeros(3, dtype=np.bool_)
    speed = np.zeros(n, dtype=np.float32)
    acc = np.zeros(n, dtype=np.float32)
    active = np.zeros(n, dtype=np.bool_)
    for a in range(n):
        reset_agent(
            a,
            seed,
            np.uint64(0),
            start_state[0],
            start_state[1],
            start_state[2],
            speed,
            acc,
            active,
            start_state,
            given,
            float_consts,
        )


def draw_start_state(seed: int, num_agents: int, float_consts: np.ndarray) -> np.ndarray:
    """The start state [3, N] (x, y, heading) that stream ``seed`` draws for its first episode
    (``reset_mode="fixed"`` hands it to every env)."""
    start_state = np.zeros((3, num_agents), dtype=np.float32)
    _draw_start(np.uint64(seed), start_state, float_consts)
    return start_state
