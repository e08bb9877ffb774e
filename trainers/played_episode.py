"""The episode ``gpu-envs render`` and ``trainer.capture_video`` play on a single-agent game: its
return, and its frames for a game whose env draws none.

A game's env draws its own frames when ``"rgb_array"`` is one of its ``metadata["render_modes"]``
(the bundled games). For one that does not (a registered game, such as docs/write-an-env.md's
PointGoal), :class:`DrawnFrames` draws each frame from env 0's observation: with the game record's
``draw_frame`` (:attr:`gpu_envs.games.Game.draw_frame`), or else as a plot of the observation's
components against the step (:class:`ObservationPlot`), which shows what the policy saw, not the
game.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_envs.games import Game, load


def draws_frames(record: Game) -> bool:
    """Whether the env the trainer builds for ``record`` draws frames itself (``"rgb_array"`` in
    its ``metadata["render_modes"]``); ``ValueError`` when that env does not load."""
    path = record.trainer_env or record.vector_env
    try:
        env_type = load(path)
    except (ImportError, AttributeError) as error:
        raise ValueError(
            f"the env {path!r} of game {record.name!r} does not load: {error}"
        ) from None
    return "rgb_array" in getattr(env_type, "metadata", {}).get("render_modes", ())


class ReturnCounter:
    """A trainer's game face that adds up env 0's rewards as it is stepped (the return of the
    episode ``record_video`` plays, which stops at that episode's end)."""

    def __init__(self, game):
        self.game, self.total, self.steps = game, 0.0, 0

    def __getattr__(self, name: str):
        return getattr(self.game, name)

    def step(self, actions):
        outputs = self.game.step(actions)
        self.total += float(outputs[1][0].sum())
        self.steps += 1
        return outputs


class DrawnFrames(ReturnCounter):
    """A trainer's game face of a game ``record`` whose env draws no frames: ``render()`` draws env
    0's frame from its observations (``record.draw_frame`` of the newest one, else an
    :class:`ObservationPlot` of them all)."""

    def __init__(self, game, record: Game):
        super().__init__(game)
        self.record = record
        self.observations: list[np.ndarray] = []
        self._dtype = game.env.single_observation_space.dtype
        if record.draw_frame:
            self._draw = load(record.draw_frame)
        else:
            self._draw = ObservationPlot(record.name, game.obs_dim, game.episode_length).frame

    @property
    def how(self) -> str:
        """Where the frames come from, in words."""
        if self.record.draw_frame:
            return f"frames drawn by {self.record.draw_frame} (Game.draw_frame)"
        return (
            f"{self.record.name}'s env draws no frames (no 'rgb_array' render mode) and its Game "
            "record no draw_frame: the frames plot env 0's observation over time"
        )

    def reset(self, seed: int | None):
        obs = self.game.reset(seed)
        self.total, self.steps, self.observations = 0.0, 0, [self._env_observation(obs)]
        return obs

    def step(self, actions):
        outputs = super().step(actions)
        self.observations.append(self._env_observation(outputs[0]))
        return outputs

    def render(self) -> np.ndarray:
        if self.record.draw_frame:
            return checked_frame(self._draw(self.observations[-1]), self.record.draw_frame)
        return self._draw(np.stack(self.observations), self.total)

    def _env_observation(self, obs) -> np.ndarray:
        """Env 0's observation as its env gives it, from the policy's ``[E, 1, obs_dim]`` (which
        ``Game.observation_scale`` scaled)."""
        row = obs[0, 0].detach().cpu().double().numpy()
        if self.record.observation_scale is not None:
            center, scale = (np.asarray(values) for values in self.record.observation_scale)
            row = row * scale + center
        return row.astype(self._dtype)


def checked_frame(frame: Any, drawer: str) -> np.ndarray:
    """``frame`` if it is an RGB image (H, W, 3) of uint8, else a ``ValueError`` naming
    ``drawer``."""
    if not (isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] == 3):
        got = getattr(frame, "shape", type(frame).__name__)
        raise ValueError(f"Game.draw_frame {drawer} must return an (H, W, 3) array, got {got}")
    if frame.dtype != np.uint8:
        raise ValueError(f"Game.draw_frame {drawer} must return uint8 pixels, got {frame.dtype}")
    return frame


class ObservationPlot:
    """Frames (400 x 640 RGB) of a line plot of one env's observation components against the
    step, titled with the game, the step and the return so far (matplotlib, off screen)."""

    def __init__(self, game: str, obs_dim: int, episode_length: int):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.game = game
        figure = Figure(figsize=(6.4, 4.0), dpi=100, layout="constrained")
        self.canvas = FigureCanvasAgg(figure)
        self.axes = figure.add_subplot()
        self.lines = [self.axes.plot([], [], label=f"obs[{k}]")[0] for k in range(obs_dim)]
        self.axes.set_xlim(0, episode_length)
        self.axes.set_xlabel("step")
        self.axes.set_ylabel("observation")
        self.axes.grid(alpha=0.3)
        if obs_dim <= 12:
            self.axes.legend(loc="upper right", fontsize="small", ncol=(obs_dim + 5) // 6)

    def frame(self, observations: np.ndarray, total: float) -> np.ndarray:
        """The frame of ``observations`` [steps + 1, obs_dim] (from the reset's) and the return
        ``total``."""
        steps = np.arange(len(observations))
        for k, line in enumerate(self.lines):
            line.set_data(steps, observations[:, k])
        finite = observations[np.isfinite(observations)]
        low, high = (finite.min(), finite.max()) if finite.size else (-1.0, 1.0)
        margin = 0.05 * (high - low) or 0.5
        self.axes.set_ylim(low - margin, high + margin)
        self.axes.set_title(
            f"{self.game}: env 0's observation, step {len(observations) - 1}, return {total:.2f}"
        )
        self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()
