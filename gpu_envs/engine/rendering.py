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


def gymnasium_frames(
    renderer: str, states: np.ndarray, **attributes: object
) -> tuple[np.ndarray, ...]:
    """One RGB frame per row of ``states``, drawn by the gymnasium env class ``"module:Class"``
    with its ``state`` set to the row (and ``attributes`` set on it, e.g. Pendulum's
    ``last_u=None``)."""
    import importlib

    quiet_sdl()
    module, name = renderer.split(":")
    env = getattr(importlib.import_module(module), name)(render_mode="rgb_array")
    try:
        frames = []
        for row in states:
            env.state = row
            for key, value in attributes.items():
                setattr(env, key, value)
            frames.append(env.render())
        return tuple(frames)
    finally:
        env.close()
