"""RGB frames of env states, drawn with the renderers of the games' reference implementations."""

from __future__ import annotations

import numpy as np


def render_cartpole_frames(states: np.ndarray) -> tuple[np.ndarray, ...]:
    """One 600x400 RGB frame per row of ``states`` [n, 4], drawn by gymnasium's CartPole
    renderer."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv as GymCartPole

    renderer = GymCartPole(render_mode="rgb_array")
    try:
        frames = []
        for row in states:
            renderer.state = row
            frames.append(renderer.render())
        return tuple(frames)
    finally:
        renderer.close()
