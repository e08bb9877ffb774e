"""The rows of ``gpu-envs device-check``: one parity check of a game, one throughput measurement.

A parity check is described by a :class:`ParitySpec` (plain data: the game, its constructor
arguments, the steps), so that the same description builds the envs of the check here and of the
kernel warm-up in other processes (:mod:`gpu_envs.device_check.compile`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpu_envs.benchmarks import report


@dataclasses.dataclass
class Row:
    """One line of the report. ``status``: PASS or FAIL for checks, empty for measurements;
    ``targets``: the GPU targets (issue 36) the row is judged against, each ``{"target", "bound",
    "status"}`` with status "met", "not met" or "not measured"."""

    check: str
    setting: str
    result: str
    status: str = ""
    record: dict = dataclasses.field(default_factory=dict)
    targets: list[dict] = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------------------- parity
@dataclasses.dataclass(frozen=True)
class ParitySpec:
    """One parity check: ``game``'s env class (``TagEnv`` for Tag, else the registry's vector env)
    built as ``cls(num_envs, device, **kwargs)`` on both devices, compared over ``steps`` steps."""

    game: str
    num_envs: int
    steps: int
    kwargs: dict[str, Any]
    setting: str

    @property
    def dtype(self) -> str:
        """The float dtype the check's envs run in (Tag: float32, its only one)."""
        return self.kwargs.get("dtype", "float32")

    def make_env(self, device: str):
        """The check's env on ``device``."""
        from gpu_envs import games

        record = games.GAMES[self.game]
        return games.load(record.trainer_env or record.vector_env)(
            self.num_envs, device, **self.kwargs
        )

    def to_json(self) -> dict[str, Any]:
        """What another process needs to build the same envs (:meth:`from_json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParitySpec:
        """The spec :meth:`to_json` described."""
        return cls(**data)


def cartpole_spec(
    *,
    dtype: str = "float32",
    autoreset_mode: str = "next_step",
    num_envs: int = 4096,
    steps: int = 500,
    max_episode_steps: int = 50,
) -> ParitySpec:
    """CartPole in ``dtype`` and ``autoreset_mode``, truncated early to exercise truncation."""
    return ParitySpec(
        "cartpole",
        num_envs,
        steps,
        dict(dtype=dtype, autoreset_mode=autoreset_mode, max_episode_steps=max_episode_steps),
        f"{dtype}, {autoreset_mode}, {num_envs} envs x {steps} steps, "
        f"max_episode_steps={max_episode_steps}",
    )


def game_spec(
    name: str,
    *,
    dtype: str = "float32",
    num_envs: int = 1024,
    steps: int = 400,
    max_episode_steps: int = 50,
) -> ParitySpec:
    """A single-agent game of :data:`gpu_envs.games.GAMES` in ``dtype``."""
    return ParitySpec(
        name,
        num_envs,
        steps,
        dict(dtype=dtype, max_episode_steps=max_episode_steps),
        f"{dtype}, {num_envs} envs x {steps} steps, max_episode_steps={max_episode_steps}",
    )


def tag_spec(*, num_envs: int = 64, steps: int = 400, params: dict | None = None) -> ParitySpec:
    """Tag with the seed config (or ``params``)."""
    from gpu_envs.games.tag.seed import seed_config

    return ParitySpec(
        "tag",
        num_envs,
        steps,
        seed_config() if params is None else dict(params),
        f"{'seed config' if params is None else 'small config'}, {num_envs} envs x {steps} steps",
    )


def parity_row(
    spec: ParitySpec, device: str, *, reference_device: str = "cpu", seed: int = 0
) -> Row:
    """``spec``'s env on ``device`` against ``reference_device``, same seeds and random actions
    (:func:`gpu_envs.benchmarks.parity.compare_devices`), as a row."""
    from gpu_envs.benchmarks.parity import compare_devices

    parity = compare_devices(
        spec.make_env, spec.steps, device=device, reference_device=reference_device, seed=seed
    )
    record = {"kind": "parity", "game": spec.game, "dtype": spec.dtype}
    record.update({k: spec.kwargs[k] for k in ("autoreset_mode",) if k in spec.kwargs})
    return Row(
        f"{spec.game} parity",
        f"{spec.setting}, {reference_device} vs {device}",
        parity.summary(),
        parity.verdict,
        {**record, **parity.to_record()},
    )


# --------------------------------------------------------------------------------------- throughput
def throughput_row(check: str, setting: str, runner, timing_options: dict, record: dict) -> Row:
    """Time ``runner`` (then close it) and report it as a row."""
    from gpu_envs.benchmarks import timing

    rate = report.format_rate
    with runner:
        result = timing.measure(runner, **timing_options)
    text = f"{rate(result.env_steps_per_s)} env-steps/s"
    if runner.agents_per_env > 1:
        text += f" ({rate(result.env_steps_per_s * runner.agents_per_env)} agent-steps/s)"
    text += f"; first call {result.first_call_s:.2f} s"
    return Row(check, setting, text, "", {"kind": "throughput", **record, **result.to_dict()})


def cartpole_throughput(
    device: str, log2_sizes: range, timing_options: dict, dtype: str = "float32"
) -> list[Row]:
    """env-steps/s of ``CartPoleVectorEnv`` on ``device``, with and without action validation."""
    from gpu_envs.benchmarks.cartpole import gpu_envs_runner

    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        pool = max(2, min(64, 2**24 // num_envs))
        for validate in (True, False):
            record = {
                "game": "cartpole",
                "num_envs": num_envs,
                "dtype": dtype,
                "validate_actions": validate,
            }
            rows.append(
                throughput_row(
                    "cartpole throughput",
                    f"2^{log2} envs, {dtype}, validate_actions={validate}",
                    gpu_envs_runner(device, dtype, validate, pool)(num_envs, 0),
                    timing_options,
                    record,
                )
            )
    return rows


def tag_throughput(device: str, log2_sizes: range, timing_options: dict) -> list[Row]:
    """env-steps/s (and agent-steps/s) of ``TagEnv`` with the seed config on ``device``."""
    from gpu_envs.benchmarks.tag import make_ours
    from gpu_envs.games.tag.seed import seed_config

    params: dict[str, Any] = seed_config()
    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        runner = make_ours(num_envs, 0, device=device, **params)
        rows.append(
            throughput_row(
                "tag throughput",
                f"2^{log2} envs, seed config ({runner.agents_per_env} agents)",
                runner,
                timing_options,
                {
                    "game": "tag",
                    "num_envs": num_envs,
                    "dtype": "float32",
                    "agents_per_env": runner.agents_per_env,
                },
            )
        )
    return rows


def tag_scale_throughput(device: str, num_envs: int, timing_options: dict) -> list[Row]:
    """env-steps/s of Tag at the original paper's scale point: ``num_envs`` games of 1000 agents
    (10 taggers and 990 runners; the seed config otherwise)."""
    from gpu_envs.benchmarks.tag import SCALE_TEAMS, make_ours
    from gpu_envs.games.tag.seed import seed_config

    taggers, runners = SCALE_TEAMS
    params: dict[str, Any] = {**seed_config(), "num_taggers": taggers, "num_runners": runners}
    runner = make_ours(num_envs, 0, device=device, **params)
    setting = f"{num_envs} envs x {taggers + runners} agents ({taggers} taggers)"
    record = {
        "game": "tag",
        "num_envs": num_envs,
        "dtype": "float32",
        "agents_per_env": taggers + runners,
    }
    return [throughput_row("tag scale throughput", setting, runner, timing_options, record)]
