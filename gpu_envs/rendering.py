"""RGB frames of env states, drawn with the renderers of the games' reference implementations."""

from __future__ import annotations

import os

import numpy as np


def quiet_sdl() -> None:
    """On a machine with no display, give pygame's SDL the dummy video driver unless the user chose
    one (the frames are drawn off screen anyway): probing for Wayland there prints
    ``XDG_RUNTIME_DIR is invalid``. Call before pygame is imported."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def render_cartpole_frames(states: np.ndarray) -> tuple[np.ndarray, ...]:
    """One 600x400 RGB frame per row of ``states`` [n, 4], drawn by gymnasium's CartPole
    renderer."""
    quiet_sdl()
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
