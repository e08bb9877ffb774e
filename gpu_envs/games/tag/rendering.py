"""Pictures of Tag: one RGB frame per state, animations of whole episodes (GIF, MP4).

Frames are drawn with Pillow: the square arena, taggers as large pink discs, runners still in the
game as small blue discs, tagged runners (out of the game) in grey, and above the arena a label
with the timestep and "runners left n (p%)" and a legend of the three discs. Animations are
encoded by imageio (GIF through Pillow; MP4 needs the optional ``imageio-ffmpeg`` package).

- ``render_tag_frame(x, y, active, num_taggers, grid_length, t, episode_length)``: one frame.
- ``render_tag_frames(state, num_taggers, grid_length, episode_length)``: one frame per game of a
  batched state (``TagEnv.state``).
- ``animate_episode(episode)``: the frames of a recorded episode (``TagEnv.fetch_episode_states``).
- ``save_animation(frames, path, fps)``: write frames to ``.gif`` or ``.mp4``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

BACKGROUND = (255, 255, 255)
ARENA_FILL = (246, 246, 250)
ARENA_EDGE = (60, 60, 60)
TAGGER_COLOUR = (236, 64, 150)
RUNNER_COLOUR = (40, 110, 220)
TAGGED_COLOUR = (170, 170, 170)
TEXT_COLOUR = (20, 20, 20)
VIDEO_SUFFIXES = (".gif", ".mp4")


def render_tag_frame(
    x: np.ndarray,
    y: np.ndarray,
    active: np.ndarray,
    num_taggers: int,
    grid_length: float,
    t: int,
    episode_length: int,
    *,
    size: int = 480,
) -> np.ndarray:
    """One RGB frame (``size + label`` x ``size``, uint8) of one Tag game.

    Args:
        x, y: agent positions, 1-D of length N (taggers first: ids ``0..num_taggers-1``).
        active: 1-D bool of length N, True for agents still in the game.
        num_taggers: how many of the first agents are taggers.
        grid_length: side L of the arena [0, L] x [0, L].
        t: the timestep shown in the label; episode_length: T.
        size: width of the frame in pixels (the arena is a square of that side).
    """
    x, y, active = (np.asarray(a).reshape(-1) for a in (x, y, active))
    n = x.shape[0]
    if y.shape[0] != n or active.shape[0] != n:
        raise ValueError(
            f"x, y and active must have the same length, got {n}, {y.shape[0]}, {active.shape[0]}"
        )
    if not 0 < num_taggers < n:
        raise ValueError(f"num_taggers must be in 1..{n - 1} for {n} agents, got {num_taggers}")
    if not grid_length > 0:
        raise ValueError(f"grid_length must be > 0, got {grid_length}")
    if size < 64:
        raise ValueError(f"size must be at least 64 pixels, got {size}")
    active = active.astype(bool)

    font = ImageFont.load_default(size=max(10, size // 32))
    row = max(18, size // 16)  # the label's two rows: the time and runners left, the legend
    label_height = 2 * row
    margin = max(6, size // 40)
    image = Image.new("RGB", (size, size + label_height), BACKGROUND)
    draw = ImageDraw.Draw(image)

    span = size - 2 * margin
    top = label_height + margin
    draw.rectangle(
        [margin, top, margin + span, top + span], fill=ARENA_FILL, outline=ARENA_EDGE, width=2
    )
    # Arena coordinates to pixels; y points up, as in the original framework's plots.
    px = margin + np.clip(x / grid_length, 0.0, 1.0) * span
    py = top + (1.0 - np.clip(y / grid_length, 0.0, 1.0)) * span

    runner_radius = max(2.0, size / 160)
    tagger_radius = 2.5 * runner_radius
    is_tagger = np.arange(n) < num_taggers
    layers = (
        (~is_tagger & ~active, runner_radius, TAGGED_COLOUR),
        (~is_tagger & active, runner_radius, RUNNER_COLOUR),
        (is_tagger, tagger_radius, TAGGER_COLOUR),
    )
    for mask, radius, colour in layers:
        for cx, cy in zip(px[mask], py[mask]):
            draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=colour)
    legend = (
        ("tagger", tagger_radius, TAGGER_COLOUR),
        ("runner", runner_radius, RUNNER_COLOUR),
        ("tagged runner", runner_radius, TAGGED_COLOUR),
    )
    left_edge, middle = float(margin), row + row / 2
    for text, radius, colour in legend:
        box = [left_edge, middle - radius, left_edge + 2 * radius, middle + radius]
        draw.ellipse(box, fill=colour)
        left_edge += 2 * radius + margin / 2
        draw.text((left_edge, middle), text, fill=TEXT_COLOUR, font=font, anchor="lm")
        left_edge += draw.textlength(text, font=font) + 2 * margin

    num_runners = n - num_taggers
    left = int(active[num_taggers:].sum())
    share = 100.0 * left / num_runners
    label = f"t = {int(t)} / {int(episode_length)}    runners left {left} ({share:.0f}%)"
    draw.text((margin, row // 2), label, fill=TEXT_COLOUR, font=font, anchor="lm")
    return np.asarray(image)


def render_tag_frames(
    state: Mapping[str, Any],
    num_taggers: int,
    grid_length: float,
    episode_length: int,
    *,
    size: int = 480,
) -> tuple[np.ndarray, ...]:
    """One frame per game of a batched state: ``x``, ``y``, ``active`` [E, N] and ``t`` [E], as
    torch tensors (any device) or NumPy arrays, e.g. ``TagEnv.state``."""
    x, y, active, t = (_to_numpy(state[key]) for key in ("x", "y", "active", "t"))
    return tuple(
        render_tag_frame(
            x[e], y[e], active[e], num_taggers, grid_length, int(t[e]), episode_length, size=size
        )
        for e in range(x.shape[0])
    )


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def animate_episode(episode: Mapping[str, Any], *, size: int = 480) -> list[np.ndarray]:
    """The frames of a recorded episode (``TagEnv.fetch_episode_states``'s dict, or any mapping with
    ``x``,
    ``y``, ``active`` [S, N], ``t`` [S], ``num_taggers``, ``grid_length``, ``episode_length``)."""
    missing = {"x", "y", "active", "t", "num_taggers", "grid_length", "episode_length"} - set(
        episode
    )
    if missing:
        raise KeyError(f"episode is missing {sorted(missing)}")
    return [
        render_tag_frame(
            x,
            y,
            active,
            episode["num_taggers"],
            episode["grid_length"],
            t,
            episode["episode_length"],
            size=size,
        )
        for x, y, active, t in zip(episode["x"], episode["y"], episode["active"], episode["t"])
    ]


def check_animation_path(path: str | Path) -> Path:
    """``path`` as a Path if an animation can be written there, else ValueError (a wrong suffix)
    or RuntimeError (``.mp4`` without ``imageio-ffmpeg``), before any frame is made."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"animation path must end in one of {VIDEO_SUFFIXES}, got {str(path)!r}")
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise RuntimeError(
            "writing .mp4 needs the imageio-ffmpeg package (pip install imageio-ffmpeg); or "
            "write a .gif"
        )
    return path


def save_animation(frames: Sequence[np.ndarray], path: str | Path, fps: float = 25.0) -> Path:
    """Write RGB ``frames`` to ``path``: ``.gif`` (Pillow) or ``.mp4`` (needs
    ``imageio-ffmpeg``)."""
    import imageio.v3 as iio

    path = check_animation_path(path)
    if len(frames) == 0:
        raise ValueError("no frames to write")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    stack = np.stack([np.asarray(frame, dtype=np.uint8) for frame in frames])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        # encoded in memory, then written: a folder that refuses the file leaves imageio's writer
        # nothing to clean up (it would retry the write from its finaliser)
        data = iio.imwrite(
            "<bytes>", stack, extension=".gif", plugin="pillow", duration=1000.0 / fps, loop=0
        )
        path.write_bytes(data)
    else:
        # libx264 wants even frame sizes: pad the bottom/right edge by one pixel if needed.
        height, width = stack.shape[1:3]
        stack = np.pad(stack, ((0, 0), (0, height % 2), (0, width % 2), (0, 0)), mode="edge")
        iio.imwrite(path, stack, extension=".mp4", plugin="FFMPEG", fps=fps, macro_block_size=1)
    return path
