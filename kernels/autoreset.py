"""Autoreset modes (``gymnasium.vector.AutoresetMode``) as the integers every kernel understands,
and the episode bookkeeping of a game whose worker owns whole envs (CartPole, Pendulum).

A step of such an env: its physics, :func:`record_episode_step` (counter and flags;
:func:`record_env_step` reads its arguments from the game's ``envs`` by name), its outputs, then
:func:`autoreset_due` says whether it must restart the env now (after saving its last
observation where SAME_STEP wants it), and a restart draws the start state and calls
:func:`count_episode`. The rules of the three modes live here once; a game supplies only its
physics, start-state draw and observation.
"""

import numpy as np

from gpu_envs.kernels.targets import kernel_function

NEXT_STEP = 0
SAME_STEP = 1
DISABLED = 2


@kernel_function
def record_episode_step(
    i,
    is_terminal,
    elapsed,
    needs_reset,
    max_episode_steps,
    autoreset_mode,
    terminated,
    truncated,
    has_final_obs,
):
    """Env ``i``'s step counter and episode flags after its physics, without a branch on the env's
    data; returns whether the step counts.

    ``False``: the env finished on the previous step and NEXT_STEP resets it on this one; the game
    gives it reward 0, both flags are False and ``needs_reset`` stays set for
    :func:`autoreset_due`. ``max_episode_steps`` 0 never truncates.
    """
    resetting = (autoreset_mode == NEXT_STEP) & needs_reset[i]
    live = not resetting
    steps = elapsed[i] + 1
    elapsed[i] = steps
    ended_terminal = live & is_terminal
    ended_truncated = live & (max_episode_steps > 0) & (steps >= max_episode_steps)
    terminated[i] = ended_terminal
    truncated[i] = ended_truncated
    done = ended_terminal | ended_truncated
    needs_reset[i] = done | resetting
    if autoreset_mode == SAME_STEP:
        has_final_obs[i] = done
    return live


@kernel_function
def record_env_step(i, is_terminal, envs):
    """:func:`record_episode_step` of env ``i`` with the engine's buffers and settings read from
    ``envs`` by name (``elapsed``, ``needs_reset``, ``max_episode_steps``, ``autoreset_mode``,
    ``terminated``, ``truncated``, ``has_final_obs``); returns whether the step counts."""
    return record_episode_step(
        i,
        is_terminal,
        envs.elapsed,
        envs.needs_reset,
        envs.max_episode_steps,
        envs.autoreset_mode,
        envs.terminated,
        envs.truncated,
        envs.has_final_obs,
    )


@kernel_function
def autoreset_due(i, envs):
    """Whether env ``i``'s step must restart it now, once :func:`record_episode_step` ran and its
    observation ``envs.obs[i]`` is written (rare, branching).

    NEXT_STEP: the env still marked ``needs_reset`` with both flags False is the one resetting now.
    SAME_STEP: an env whose episode ended restarts at once; its last observation is kept in
    ``envs.final_obs[i]`` first. Reads the engine's buffers and ``autoreset_mode`` setting by name
    from ``envs`` (the logic's ``KernelArgs``).
    """
    if envs.autoreset_mode == NEXT_STEP:
        return envs.needs_reset[i] and not (envs.terminated[i] or envs.truncated[i])
    if envs.autoreset_mode == SAME_STEP and envs.has_final_obs[i]:
        for k in range(envs.obs.shape[1]):
            envs.final_obs[i, k] = envs.obs[i, k]
        return True
    return False


@kernel_function
def count_episode(i, envs):
    """Env ``i`` starts an episode: the next one of its random stream (``episode``), at step 0,
    no longer waiting for a reset. Its start state is drawn before (from the episode number)."""
    envs.episode[i] += np.uint64(1)
    envs.elapsed[i] = 0
    envs.needs_reset[i] = False
