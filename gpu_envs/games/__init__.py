"""The games of gpu-envs, one record each: everything outside a game's own modules that names it.

Registration (``gpu_envs/__init__.py``: the gymnasium ids), the trainer (its game faces, the config
names, the default presets), ``gpu-envs evaluate`` / ``render`` / ``bench`` / ``device-check`` and
``gpu_envs.benchmarks.parity`` read :data:`GAMES`. Adding a game is its logic module
(``kernels/<game>_logic.py``), its env declaration (``gpu_envs/games/<game>.py``) and one
:class:`Game` here (with its tests and docs).

A game written outside the package joins :data:`GAMES` through :func:`register_game`, or through
a Python entry point of the group ``gpu_envs.games`` (``name = "module:RECORD"``, a :class:`Game`
named ``name``), which :func:`game` loads the first time a name is not found, so that
``gpu-envs train NAME`` takes it in a fresh process. A plug-in that fails to load is skipped with
one warning naming it: the built-in games never depend on the plug-ins.

Classes are named by import path (``"module:attribute"``) and imported when used, so importing this
module (and ``gpu_envs``) imports no env, no numba and no torch. What the tools need to know without
importing an env (its episode length, its render fps) is stated here, and the env classes read it.
"""

from __future__ import annotations

import importlib
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Game:
    """One game as the package's tools see it."""

    name: str
    """Its name on the command line and in run configs (``gpu-envs train NAME``)."""
    env_id: str
    """Its gymnasium id (``gym.make`` / ``gym.make_vec``)."""
    vector_env: str
    """``"module:Class"`` of the batched env (``gym.make_vec``'s entry point)."""
    single_env: str = ""
    """``"module:Class"`` of ``gym.make``'s entry point (empty: none)."""
    max_episode_steps: int | None = None
    """gymnasium's episode length of the id (None: the env's own), stated here only: the vector
    env's default ``max_episode_steps`` reads it."""
    reward_threshold: float | None = None
    """gymnasium's reward threshold of the id (None: it has none)."""
    solved_threshold: float | None = None
    """The greedy mean return ``gpu-envs evaluate`` compares with and the presets stop at."""
    solved_what: str = ""
    """What :attr:`solved_threshold` is, in words."""
    render_fps: int = 30
    """Frames per second of ``gpu-envs render``'s animations, stated here only: the env classes'
    ``metadata["render_fps"]`` reads it."""
    trainer_env: str = ""
    """``"module:Class"`` of the env the trainer builds (default: :attr:`vector_env`)."""
    trainer_face: str = "discrete"
    """How the trainer sees it: ``"discrete"`` (one agent, one categorical action),
    ``"continuous"`` (one agent, a Gaussian action clipped to the bounds) or ``"tag"``."""
    observation_scale: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    """``(center, scale)``: the trainer feeds the policy ``(obs - center) / scale`` (a fixed
    normalisation, for games whose observations differ in scale by orders of magnitude, as
    MountainCar's position and velocity); None: the observations as they are."""
    potential: str = ""
    """``"module:function"`` of the potential ``Phi(obs)`` (the env's observations [..., obs_dim]
    -> [...]) that ``trainer.reward_shaping`` shapes PPO's rewards with; empty: none."""
    aliases: tuple[str, ...] = ()
    """Other names run configs may give (lower case)."""
    parity_rules: str = ""
    """``"module:function"`` giving the near-tie rules of ``benchmarks.parity`` for an env of the
    game (``function(env)``); empty: none known."""
    benchmark: str = ""
    """Module of ``gpu-envs bench NAME`` (empty: none)."""
    train_benchmark: str = ""
    """Module of ``gpu-envs bench train-NAME`` (empty: none)."""
    draw_frame: str = ""
    """``"module:function"`` drawing ``gpu-envs render``'s frames of a game whose env draws none
    (no ``"rgb_array"`` in its ``metadata["render_modes"]``): ``function(observation)``, one env's
    observation (a NumPy array of the observation space's shape) -> an RGB frame (H, W, 3) uint8.
    Empty: ``gpu-envs render`` plots such a game's observations over time instead."""

    @property
    def preset(self) -> str:
        """The name of its default run config in ``gpu_envs.runs.presets``."""
        return self.name

    @property
    def vector_entry_point(self) -> str:
        """``gym.make_vec``'s entry point of :attr:`env_id`: builds :attr:`vector_env`, with the
        ``array`` keyword (``"torch"``, the default, or ``"numpy"``; see
        :mod:`gpu_envs.games.vector_entry`)."""
        return f"gpu_envs.games.vector_entry:{self.name}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that designates it in a run config: its name, aliases and ids (lower
        case)."""
        bare_id = self.env_id.split("/", 1)[-1]
        return tuple(
            dict.fromkeys((self.name, *self.aliases, bare_id.lower(), self.env_id.lower()))
        )


def load(path: str) -> Any:
    """The object at ``"module:attribute"``."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


_MOUNTAIN_CAR_SCALE = ((-0.3, 0.0), (0.9, 0.02))

GAMES: dict[str, Game] = {
    game.name: game
    for game in (
        Game(
            name="cartpole",
            env_id="gpu_envs/CartPole-v1",
            vector_env="gpu_envs.games.cartpole:CartPoleVectorEnv",
            single_env="gpu_envs.games.cartpole:CartPoleEnv",
            max_episode_steps=500,
            reward_threshold=475.0,
            solved_threshold=475.0,
            solved_what="CartPole-v1 reward threshold",
            render_fps=50,
            parity_rules="gpu_envs.benchmarks.parity:cartpole_env_rules",
            benchmark="gpu_envs.benchmarks.cartpole",
            train_benchmark="gpu_envs.benchmarks.train_cartpole",
        ),
        Game(
            name="pendulum",
            env_id="gpu_envs/Pendulum-v1",
            vector_env="gpu_envs.games.pendulum:PendulumVectorEnv",
            single_env="gpu_envs.games.pendulum:PendulumEnv",
            max_episode_steps=200,
            solved_threshold=-250.0,
            solved_what="Pendulum training target",
            render_fps=30,
            trainer_face="continuous",
            benchmark="gpu_envs.benchmarks.pendulum",
            train_benchmark="gpu_envs.benchmarks.train_pendulum",
        ),
        Game(
            name="acrobot",
            env_id="gpu_envs/Acrobot-v1",
            vector_env="gpu_envs.games.acrobot:AcrobotVectorEnv",
            single_env="gpu_envs.games.acrobot:AcrobotEnv",
            max_episode_steps=500,
            reward_threshold=-100.0,
            solved_threshold=-100.0,
            solved_what="Acrobot-v1 reward threshold",
            render_fps=15,
            observation_scale=((0.0,) * 6, (1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi)),
        ),
        Game(
            name="mountaincar",
            env_id="gpu_envs/MountainCar-v0",
            vector_env="gpu_envs.games.mountain_car:MountainCarVectorEnv",
            single_env="gpu_envs.games.mountain_car:MountainCarEnv",
            max_episode_steps=200,
            reward_threshold=-110.0,
            solved_threshold=-110.0,
            solved_what="MountainCar-v0 reward threshold",
            render_fps=30,
            # the velocity in units of its typical size (the bounds, 0.07, are rarely approached)
            observation_scale=_MOUNTAIN_CAR_SCALE,
            potential="gpu_envs.games.mountain_car:mechanical_energy",
            aliases=("mountain_car",),
        ),
        Game(
            name="mountaincar-continuous",
            env_id="gpu_envs/MountainCarContinuous-v0",
            vector_env="gpu_envs.games.mountain_car:MountainCarContinuousVectorEnv",
            single_env="gpu_envs.games.mountain_car:MountainCarContinuousEnv",
            max_episode_steps=999,
            reward_threshold=90.0,
            solved_threshold=90.0,
            solved_what="MountainCarContinuous-v0 reward threshold",
            render_fps=30,
            trainer_face="continuous",
            observation_scale=_MOUNTAIN_CAR_SCALE,
            aliases=("mountain_car_continuous",),
        ),
        Game(
            name="tag",
            env_id="gpu_envs/Tag-v0",
            # Rows are (game, agent) pairs: gym.make_vec only (one row is not a game, so gym.make
            # raises an error naming gym.make_vec and gpu_envs.tag_v0.parallel_env).
            vector_env="gpu_envs.games.tag.gym_vector:TagGymVectorEnv",
            single_env="gpu_envs.games.tag.gym_vector:single_env_unavailable",
            max_episode_steps=None,
            render_fps=25,
            trainer_env="gpu_envs.games.tag.env:TagEnv",
            trainer_face="tag",
            aliases=("tag_continuous",),
            parity_rules="gpu_envs.benchmarks.parity:tag_env_rules",
            benchmark="gpu_envs.benchmarks.tag",
        ),
    )
}


#: The values of :attr:`Game.trainer_face`.
TRAINER_FACES = ("discrete", "continuous", "tag")

#: The entry point group of the games registered by installed distributions.
ENTRY_POINT_GROUP = "gpu_envs.games"

_entry_points_loaded = False


def register_game(record: Game) -> Game:
    """Add ``record`` to :data:`GAMES`: the trainer, its presets and ``gpu-envs train`` /
    ``evaluate`` / ``render`` then take it by any of its :attr:`~Game.names`. Registering the same
    record again does nothing; a record whose names designate another game is refused, naming
    it. Returns ``record``.

    Only the package's tools read the record: register the env id with gymnasium yourself
    (``gym.register``) for ``gym.make_vec``.
    """
    if not isinstance(record, Game):
        raise TypeError(f"register_game takes a gpu_envs.games.Game, got {type(record).__name__}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", record.name):
        raise ValueError(
            f"Game.name: must be lower case letters, digits, '_', '-' or '.', got {record.name!r}"
        )
    if record.trainer_face not in TRAINER_FACES:
        raise ValueError(
            f"Game.trainer_face: must be one of {TRAINER_FACES}, got {record.trainer_face!r}"
        )
    for field in ("vector_env", "single_env", "trainer_env", "potential", "draw_frame"):
        path = getattr(record, field)
        module, _, attribute = path.partition(":")
        if path and not (module and attribute):
            raise ValueError(f'Game.{field}: must be "module:attribute", got {path!r}')
    if GAMES.get(record.name) == record:
        return record
    for other in GAMES.values():
        shared = sorted(set(record.names) & set(other.names))
        if shared:
            raise ValueError(
                f"game {record.name!r}: the names {shared} already designate the game "
                f"{other.name!r}; give it other names"
            )
    GAMES[record.name] = record
    return record


class GamePluginWarning(UserWarning):
    """An installed ``gpu_envs.games`` entry point that does not give a game: it is skipped."""


def load_entry_points() -> None:
    """Register the games of the installed distributions' ``gpu_envs.games`` entry points, once
    per process (each entry point names a :class:`Game` of the same name).

    An entry point that does not give one (its module does not import, loading it raises, it
    names something else, or its record is refused by :func:`register_game`) is skipped with one
    :class:`GamePluginWarning` naming it: the built-in games and the other plug-ins work on."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _register_entry_point(point)
        except Exception as error:
            warnings.warn(
                f"skipping the game plug-in entry point {point.name} = {point.value!r} (group "
                f"{ENTRY_POINT_GROUP}): {error}",
                GamePluginWarning,
                stacklevel=2,
            )


def _register_entry_point(point: Any) -> None:
    """Register the :class:`Game` that the entry point ``point`` names; an exception saying why
    not otherwise."""
    try:
        record = point.load()
    except Exception as error:
        raise RuntimeError(f"it does not load: {type(error).__name__}: {error}") from error
    if not isinstance(record, Game) or record.name != point.name:
        raise TypeError(f"it must name a gpu_envs.games.Game named {point.name!r}")
    register_game(record)


def game(name: str) -> Game:
    """The game a run config's ``name`` (a game name, alias or env id, any case) designates,
    among :data:`GAMES` and then the entry points' games; ``KeyError`` naming the known names
    otherwise."""
    key = name.lower()
    for record in GAMES.values():
        if key in record.names:
            return record
    if not _entry_points_loaded:
        load_entry_points()
        return game(name)
    known = sorted(n for record in GAMES.values() for n in record.names)
    raise KeyError(
        f"unknown game {name!r}; use one of {known}, or register yours "
        "(gpu_envs.games.register_game, docs/write-an-env.md)"
    )


def single_agent_games() -> list[Game]:
    """The games a greedy evaluation scores by mean return (all but Tag), the entry points'
    included."""
    load_entry_points()
    return [record for record in GAMES.values() if record.trainer_face != "tag"]
