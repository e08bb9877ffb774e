"""Parity of two gpu-envs vector envs stepped with the same seeds and actions (CPU vs CUDA, or any
pair).

:func:`compare_envs` resets both envs with one seed, steps them with the same actions, and after
the reset and every step compares each output (``obs``, ``rewards``, ``terminated``, ``truncated``,
``info/<key>``) and each state array of :func:`state_snapshot`. The :class:`ParityReport` holds one
:class:`FieldStep` per step and field (exact, within tolerance, near-tie or mismatch), the near-ties
and the mismatches, and a verdict. :func:`compare_devices` builds one env on each of two devices and
compares them under seeded random actions (:func:`random_actions`): the check behind
``gpu-envs device-check``.

Policy:

- Each step is compared from the same state: after each comparison the candidate's buffers are
  loaded with the reference's (``load_buffers_state``; ``from_same_state=False`` lets both run
  free). Bit-exactness is not required: the CUDA compiler contracts multiply-adds into FMAs and
  libdevice's sin/cos differ from the host's in the last ulp, so a correct GPU step differs from
  the CPU's by a few ulps of its operations. From the same state that is all a step can differ by;
  run free, the ulps compound through the dynamics and a chaotic game grows them past any fixed
  tolerance: Pendulum near upright multiplies a difference by ~1.21 per step (``e^(dt *
  sqrt(3 g / 2 l))``), ~10^4 over a 50-step episode, so one float32 ulp (1.2e-7) reaches 1e-3.
- Floating-point fields are compared with ``torch.isclose`` under a relative + absolute tolerance
  per dtype (:data:`DEFAULT_TOLERANCES`), sized for one step's rounding: float32's 1e-4 is ~800
  ulps at 1.0 and ~13 ulps of the largest intermediates (~100, Acrobot's dynamics), float64's
  1e-9 / 1e-10 millions of ulps. ``tests/benchmarks/test_parity_drift.py`` proves them: every
  game and dtype passes with its state and outputs nudged by 1-4 ulps before and after every step
  (``np.nextafter``) and fails with a planted error of 1e-3.
- Integer and bool fields (flags, counters, seeds, Tag's in-game flags) must be equal, and so must
  the order of Tag's observed neighbours (it shows in the columns of the observation), except where
  a near-tie explains the difference:

  * kNN order: two neighbours whose float32 squared distances are at most ``ulps`` ulps apart may
    swap (:func:`classify_knn_difference`);
  * tag radius: a runner whose float32 distance to its nearest tagger is at most ``ulps`` ulps from
    the tagging margin may be tagged on one backend only (:func:`classify_tag_difference`);
  * termination: a CartPole whose ``|x|`` or ``|theta|`` is within the state dtype's tolerance of
    2.4 or 12 degrees may terminate on one backend only (:func:`classify_termination_difference`).

- After a near-tie the env's two trajectories legitimately diverge: the env is reported once
  ("near-tie at step s (kind)") and left out of every later comparison. An unexplained difference
  is a mismatch naming the step, env and fields; that env is left out afterwards too.
- Verdict: PASS when every difference is within tolerance or an explained near-tie, else FAIL.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gpu_envs.games import GAMES, load

#: Float32 ulps within which two values count as tied (kNN distances, tag distance vs margin).
DEFAULT_ULPS = 4
#: CartPole-v1's termination thresholds (gymnasium): ``|x| > 2.4``, ``|theta| > 12`` degrees.
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360


class Outcome(str, enum.Enum):
    """How a field (or a single difference) compares between the two backends."""

    EXACT = "exact"
    WITHIN_TOLERANCE = "within tolerance"
    NEAR_TIE = "near-tie"
    MISMATCH = "mismatch"


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``|candidate - reference| <= atol + rtol * |reference|`` (the rule of ``torch.isclose``)."""

    rtol: float
    atol: float

    def covers(self, value: float, reference: float) -> bool:
        """True when ``value`` lies within this tolerance of ``reference``."""
        return abs(value - reference) <= self.atol + self.rtol * abs(reference)


#: Float tolerance per dtype, for one step from the same state (see the module): FMA contraction
#: and last-ulp libm differences of one step stay orders of magnitude inside it.
DEFAULT_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(rtol=1e-9, atol=1e-10),
    torch.float32: Tolerance(rtol=1e-4, atol=1e-4),
}


# --------------------------------------------------------------------------------- classifiers
def ulp_distance(a: float, b: float) -> float:
    """How many float32 values lie between ``a`` and ``b`` (rounded to float32), plus one: 0 when
    equal, 1 for neighbours; ``inf`` when either is NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.inf

    def ordinal(value: float) -> int:  # float32 bits as an integer that counts up with the value
        bits = int(np.float32(value).view(np.int32))
        return bits if bits >= 0 else -(bits & 0x7FFFFFFF)

    return abs(ordinal(a) - ordinal(b))


def classify_knn_difference(d2_a: float, d2_b: float, ulps: float = DEFAULT_ULPS) -> Outcome:
    """Two neighbours ranked in a different order by the backends, at squared distances ``d2_a``
    and ``d2_b``: a NEAR_TIE when they are at most ``ulps`` float32 ulps apart, else a MISMATCH."""
    return Outcome.NEAR_TIE if ulp_distance(d2_a, d2_b) <= ulps else Outcome.MISMATCH


def classify_tag_difference(distance: float, margin: float, ulps: float = DEFAULT_ULPS) -> Outcome:
    """A runner tagged on one backend only, at float32 ``distance`` from its nearest tagger: a
    NEAR_TIE when that is at most ``ulps`` float32 ulps from the tagging ``margin``, else a
    MISMATCH."""
    return Outcome.NEAR_TIE if ulp_distance(distance, margin) <= ulps else Outcome.MISMATCH


def classify_termination_difference(
    x: float, theta: float, tolerance: Tolerance = DEFAULT_TOLERANCES[torch.float64]
) -> Outcome:
    """A CartPole terminated on one backend only, with cart position ``x`` and pole angle ``theta``
    (the post-step state): a NEAR_TIE when ``|x|`` or ``|theta|`` lies within ``tolerance`` of its
    threshold (2.4, 12 degrees), else a MISMATCH."""
    at_threshold = tolerance.covers(abs(x), X_THRESHOLD) or tolerance.covers(
        abs(theta), THETA_THRESHOLD
    )
    return Outcome.NEAR_TIE if at_threshold else Outcome.MISMATCH


# --------------------------------------------------------------------------------- report
@dataclasses.dataclass(frozen=True)
class FieldStep:
    """One field at one step: its outcome, its largest ``|difference|`` over the envs still compared
    (None for integer and bool fields), and the envs where it differed beyond tolerance."""

    step: int
    field: str
    outcome: Outcome
    max_abs_diff: float | None
    envs: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class NearTie:
    """An env whose backends parted at ``step`` for a reason of kind ``kind`` (see the module)."""

    step: int
    env: int
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"near-tie at step {self.step} ({self.kind}), env {self.env}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """An env whose ``fields`` differed at ``step`` with no near-tie to explain it."""

    step: int
    env: int
    fields: tuple[str, ...]

    def __str__(self) -> str:
        return f"mismatch at step {self.step}, env {self.env}: {', '.join(self.fields)}"


@dataclasses.dataclass
class ParityReport:
    """What :func:`compare_envs` found (steps: step 0 is the reset, 1..steps the steps)."""

    num_envs: int
    steps: int
    fields: list[FieldStep] = dataclasses.field(default_factory=list)
    near_ties: list[NearTie] = dataclasses.field(default_factory=list)
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)

    @property
    def verdict(self) -> str:
        """PASS when every difference is within tolerance or an explained near-tie, else FAIL."""
        return "FAIL" if self.mismatches else "PASS"

    @property
    def diverged_envs(self) -> int:
        """Envs left out of the comparison after a near-tie or a mismatch."""
        return len(self.near_ties) + len(self.mismatches)

    def max_abs_diff(self) -> dict[str, float]:
        """Largest ``|difference|`` of each floating-point field over all steps and compared
        envs."""
        worst: dict[str, float] = {}
        for entry in self.fields:
            if entry.max_abs_diff is not None:
                worst[entry.field] = max(worst.get(entry.field, 0.0), entry.max_abs_diff)
        return worst

    def summary(self, limit: int = 3) -> str:
        """One paragraph: verdict, diverged envs, the first ``limit`` mismatches and near-ties."""
        text = f"{self.verdict}: {self.num_envs} envs x {self.steps} steps"
        diffs = {name: diff for name, diff in self.max_abs_diff().items() if diff}
        if diffs:
            text += "; max |diff| " + ", ".join(
                f"{name} {diff:.1e}" for name, diff in diffs.items()
            )
        text += f"; {len(self.near_ties)} near-tie(s), {len(self.mismatches)} mismatch(es)"
        for item in [*self.mismatches[:limit], *self.near_ties[:limit]]:
            text += f"; {item}"
        return text

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready digest: verdict, counts, max ``|diff|`` per field, near-ties and
        mismatches."""
        return {
            "verdict": self.verdict,
            "num_envs": self.num_envs,
            "steps": self.steps,
            "diverged_envs": self.diverged_envs,
            "max_abs_diff": self.max_abs_diff(),
            "near_ties": [dataclasses.asdict(n) for n in self.near_ties],
            "mismatches": [dataclasses.asdict(m) for m in self.mismatches],
        }


# --------------------------------------------------------------------------------- near-tie rules
@dataclasses.dataclass(frozen=True)
class Divergence:
    """One env that differs at ``step``: the differing ``fields`` and every field of that env on
    both backends (``previous``: the reference's fields one step earlier, None at the reset)."""

    step: int
    env: int
    fields: tuple[str, ...]
    reference: dict[str, torch.Tensor]
    candidate: dict[str, torch.Tensor]
    previous: dict[str, torch.Tensor] | None
    tolerances: Mapping[torch.dtype, Tolerance]

    def close(self, name: str) -> torch.Tensor:
        """Elementwise: ``name`` agrees within tolerance (floats) or exactly (others)."""
        return _agree(self.reference[name], self.candidate[name], self.tolerances)


#: A rule returns a detail text when its near-tie explains the divergence, else None.
NearTieRule = Callable[[Divergence], "str | None"]


def _cartpole_termination(div: Divergence) -> str | None:
    if "terminated" not in div.fields:
        return None
    # The backend that did not terminate holds the post-step state in either autoreset mode.
    side = div.candidate if bool(div.reference["terminated"]) else div.reference
    state = side["state"]
    x, theta = float(state[0]), float(state[2])
    if classify_termination_difference(x, theta, div.tolerances[state.dtype]) is Outcome.MISMATCH:
        return None
    return f"x = {x!r}, theta = {theta!r} at a termination threshold"


def _tag_radius(div: Divergence, num_taggers: int, margin: float, ulps: float) -> str | None:
    if not (bool(div.close("x").all()) and bool(div.close("y").all())):
        return None  # a tag moves nobody: differing positions are not a tag flip
    flipped = ~(div.close("active") & div.close("rewards"))
    runners = [r for r in flipped.nonzero().flatten().tolist() if r >= num_taggers]
    if not runners:
        return None
    x, y = div.reference["x"].numpy(), div.reference["y"].numpy()
    distances = []
    for r in runners:
        dx, dy = x[:num_taggers] - x[r], y[:num_taggers] - y[r]
        distance = np.float32(math.sqrt(np.float64((dx * dx + dy * dy).min())))
        if classify_tag_difference(distance, margin, ulps) is Outcome.MISMATCH:
            return None
        distances.append(f"runner {r} at {float(distance)!r}")
    return f"{', '.join(distances)} vs tagging margin {margin!r}"


def _knn_order(div: Divergence, num_observed: int, ulps: float) -> str | None:
    if set(div.fields) != {"obs"}:
        return None  # a swap of neighbours changes the observation only
    k = num_observed
    ref = div.reference
    # The observation ranks the moved positions among the agents in the game before this step's
    # tags: the previous step's flags, unless the env was reset at this step (t == 0).
    before = ref if div.previous is None or int(ref["t"]) == 0 else div.previous
    active = before["active"].numpy()
    x, y = ref["x"].numpy(), ref["y"].numpy()
    differs = ~div.close("obs")
    agents = differs.any(dim=1).nonzero().flatten().tolist()
    for i in agents:
        others = np.flatnonzero(active & (np.arange(active.size) != i))
        dx, dy = x[others] - x[i], y[others] - y[i]
        d2 = np.sort(dx * dx + dy * dy, kind="stable")
        tied = set()
        for rank in range(min(k, d2.size - 1)):
            if classify_knn_difference(d2[rank], d2[rank + 1], ulps) is Outcome.NEAR_TIE:
                tied |= {rank, rank + 1}
        differing = differs[i].nonzero().flatten().tolist()
        # Neighbour column c holds entries b * k + c of blocks b = 0..6; the rest is the agent's
        # own.
        if not tied or any(index >= 7 * k or index % k not in tied for index in differing):
            return None
    return (
        f"agent(s) {agents} observe neighbours at squared distances within {ulps} ulps in another "
        "order"
    )


def cartpole_rules() -> dict[str, NearTieRule]:
    """CartPole's near-ties: a termination at a threshold."""
    return {"termination": _cartpole_termination}


def tag_rules(params, ulps: float = DEFAULT_ULPS) -> dict[str, NearTieRule]:
    """Tag's near-ties for :class:`gpu_envs.games.tag.params.TagParams` ``params``: the tag radius,
    and
    the kNN order in partial observation."""
    margin = float(np.float32(params.tagging_distance) * np.float32(params.grid_length))
    rules: dict[str, NearTieRule] = {
        "tag radius": partial(_tag_radius, num_taggers=params.num_taggers, margin=margin, ulps=ulps)
    }
    if not params.use_full_observation:
        rules["kNN order"] = partial(
            _knn_order, num_observed=params.num_other_agents_observed, ulps=ulps
        )
    return rules


def cartpole_env_rules(env, ulps: float = DEFAULT_ULPS) -> dict[str, NearTieRule]:
    """:func:`cartpole_rules` for a CartPole env (``gpu_envs.games``' rules of CartPole)."""
    return cartpole_rules()


def tag_env_rules(env, ulps: float = DEFAULT_ULPS) -> dict[str, NearTieRule]:
    """:func:`tag_rules` of a Tag env's parameters (``gpu_envs.games``' rules of Tag)."""
    return tag_rules(env.params, ulps)


def near_tie_rules(env, ulps: float = DEFAULT_ULPS) -> dict[str, NearTieRule]:
    """The near-ties that may explain differences of ``env``'s game, by kind (empty: none known):
    the ``parity_rules`` of its record in ``gpu_envs.games``."""
    for record in GAMES.values():
        if not record.parity_rules:
            continue
        classes = tuple(load(path) for path in (record.vector_env, record.trainer_env) if path)
        if isinstance(env, classes):
            return load(record.parity_rules)(env, ulps)
    return {}


# --------------------------------------------------------------------------------- comparison
def state_snapshot(env) -> dict[str, torch.Tensor]:
    """Copies of every state array of ``env`` by name, [num_envs, ...] each
    (``env.state_snapshot()``)."""
    return env.state_snapshot()


def _fields(env, result: tuple) -> dict[str, torch.Tensor]:
    """The outputs of ``reset`` ((obs, info)) or ``step`` and the state snapshot, on the CPU."""
    names = (
        ("obs", "info")
        if len(result) == 2
        else ("obs", "rewards", "terminated", "truncated", "info")
    )
    fields = {name: value for name, value in zip(names, result) if name != "info"}
    fields.update(
        {f"info/{key}": value for key, value in result[-1].items() if torch.is_tensor(value)}
    )
    fields.update(state_snapshot(env))
    return {name: value.detach().to("cpu", copy=True) for name, value in fields.items()}


def _agree(
    reference: torch.Tensor, candidate: torch.Tensor, tolerances: Mapping[torch.dtype, Tolerance]
) -> torch.Tensor:
    if not reference.is_floating_point():
        return reference == candidate
    if reference.dtype not in tolerances:
        raise ValueError(
            f"no tolerance for dtype {reference.dtype}: pass tolerances={{{reference.dtype}: "
            "Tolerance(rtol, atol), ...}}"
        )
    tol = tolerances[reference.dtype]
    return torch.isclose(candidate, reference, rtol=tol.rtol, atol=tol.atol, equal_nan=True)


def _check_alike(
    reference: dict[str, torch.Tensor], candidate: dict[str, torch.Tensor], num_envs: int
) -> None:
    if reference.keys() != candidate.keys():
        raise ValueError(
            f"the envs report different fields: {sorted(reference)} vs {sorted(candidate)}; "
            "compare two envs of one game with the same settings"
        )
    for name, value in reference.items():
        other = candidate[name]
        if (
            value.shape != other.shape
            or value.dtype != other.dtype
            or value.shape[:1] != (num_envs,)
        ):
            raise ValueError(
                f"field {name!r} is {tuple(value.shape)} {value.dtype} on the reference and "
                f"{tuple(other.shape)} {other.dtype} on the candidate (expected [{num_envs}, ...] "
                "on both); build both envs with the same settings (dtype, num_envs)"
            )


def compare_envs(
    reference,
    candidate,
    actions_fn: Callable[[int], torch.Tensor],
    steps: int,
    *,
    seed: int = 0,
    tolerances: Mapping[torch.dtype, Tolerance] | None = None,
    rules: Mapping[str, NearTieRule] | None = None,
    ulps: float = DEFAULT_ULPS,
    from_same_state: bool = True,
) -> ParityReport:
    """Reset both envs with ``seed``, step them ``steps`` times with ``actions_fn(step)`` (step =
    1..steps; a CPU tensor, moved to each env's device) and compare them after every call.

    ``reference`` and ``candidate`` are gpu-envs vector envs of one game with the same settings,
    on any devices. ``tolerances`` (default :data:`DEFAULT_TOLERANCES`) maps float dtypes to their
    :class:`Tolerance`; ``rules`` (default :func:`near_tie_rules` of the reference, with ``ulps``)
    are the near-ties that may explain a difference. ``from_same_state``: after each comparison
    the candidate takes the reference's buffers, so that every step starts from the same state
    (False: both run free, and differences compound).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if reference.num_envs != candidate.num_envs:
        raise ValueError(
            f"num_envs differs: {reference.num_envs} (reference) vs {candidate.num_envs} "
            "(candidate)"
        )
    tolerances = DEFAULT_TOLERANCES if tolerances is None else tolerances
    rules = near_tie_rules(reference, ulps) if rules is None else rules
    num_envs = reference.num_envs
    report = ParityReport(num_envs, steps)
    compared = torch.ones(num_envs, dtype=torch.bool)
    if from_same_state and not hasattr(candidate, "load_buffers_state"):
        raise ValueError(
            f"{type(candidate).__name__} has no load_buffers_state: compare it with "
            "from_same_state=False"
        )
    ref = _fields(reference, reference.reset(seed=seed))
    cand = _fields(candidate, candidate.reset(seed=seed))
    previous = None
    for step in range(steps + 1):
        if step:
            actions = actions_fn(step)
            previous, ref = ref, _fields(reference, reference.step(actions.to(reference.device)))
            cand = _fields(candidate, candidate.step(actions.to(candidate.device)))
        _check_alike(ref, cand, num_envs)
        _compare_step(step, ref, cand, previous, compared, tolerances, rules, report)
        if from_same_state and step < steps:
            state = reference.buffers_state()
            candidate.load_buffers_state({n: t.to(candidate.device) for n, t in state.items()})
    return report


def random_actions(env, generator: torch.Generator, leading: tuple[int, ...] = ()) -> torch.Tensor:
    """Uniform random actions for ``env``, drawn on the CPU from ``generator``.

    Shape ``(*leading, *action shape of one step)``: levels of a ``Discrete`` or ``MultiDiscrete``
    action space (int64), values within a ``Box``'s bounds (float32).
    """
    step_shape, _ = env.action_layout()
    shape = (*leading, *step_shape)
    space = env.single_action_space
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return torch.randint(start, start + int(space.n), shape, generator=generator)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, dtype=torch.float64)
        levels = (torch.rand(shape, generator=generator, dtype=torch.float64) * nvec).long()
        return levels + torch.as_tensor(space.start, dtype=torch.int64)
    if isinstance(space, gym.spaces.Box):
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        return low + torch.rand(shape, generator=generator) * (high - low)
    raise NotImplementedError(f"no random actions for {space}")


def compare_devices(
    make_env: Callable[[str], Any],
    steps: int,
    *,
    device: str,
    reference_device: str = "cpu",
    seed: int = 0,
    **options: Any,
) -> ParityReport:
    """Compare ``make_env(device)`` against ``make_env(reference_device)``: reset with ``seed``,
    then ``steps`` steps of :func:`random_actions` from a generator seeded with ``seed``.

    ``make_env(device)`` builds one env (e.g. ``functools.partial(CartPoleVectorEnv, 4096,
    dtype="float32")``); ``options`` are those of :func:`compare_envs`. Both envs are closed after.
    """
    reference, candidate = make_env(reference_device), make_env(device)
    generator = torch.Generator().manual_seed(seed)
    try:
        return compare_envs(
            reference,
            candidate,
            lambda _: random_actions(reference, generator),
            steps,
            seed=seed,
            **options,
        )
    finally:
        reference.close()
        candidate.close()


def _compare_step(
    step: int,
    ref: dict[str, torch.Tensor],
    cand: dict[str, torch.Tensor],
    previous: dict[str, torch.Tensor] | None,
    compared: torch.Tensor,
    tolerances: Mapping[torch.dtype, Tolerance],
    rules: Mapping[str, NearTieRule],
    report: ParityReport,
) -> None:
    """Compare one step's fields over the ``compared`` envs, classify each differing env, record the
    outcome of every field in ``report`` and drop the differing envs from ``compared`` (in
    place)."""
    num_envs = compared.numel()
    beyond, diffs, exact = {}, {}, {}
    for name, value in ref.items():
        beyond[name] = (
            ~_agree(value, cand[name], tolerances).reshape(num_envs, -1).all(dim=1) & compared
        )
        equal = (value == cand[name]).reshape(num_envs, -1).all(dim=1)
        if value.is_floating_point():
            equal |= (value.isnan() & cand[name].isnan()).reshape(num_envs, -1).all(dim=1)
            diff = (value.double() - cand[name].double()).abs().nan_to_num(nan=math.inf)
            diff = diff.reshape(num_envs, -1)[compared]
            diffs[name] = float(diff.max()) if diff.numel() else 0.0
        exact[name] = bool(equal[compared].all())
    near_tie_envs = set()
    for env in torch.stack(list(beyond.values())).any(dim=0).nonzero().flatten().tolist():
        fields = tuple(name for name in ref if beyond[name][env])
        div = Divergence(
            step,
            env,
            fields,
            {n: v[env] for n, v in ref.items()},
            {n: v[env] for n, v in cand.items()},
            None if previous is None else {n: v[env] for n, v in previous.items()},
            tolerances,
        )
        for kind, rule in rules.items():
            detail = rule(div)
            if detail is not None:
                report.near_ties.append(NearTie(step, env, kind, detail))
                near_tie_envs.add(env)
                break
        else:
            report.mismatches.append(Mismatch(step, env, fields))
        compared[env] = False
    for name in ref:
        envs = tuple(beyond[name].nonzero().flatten().tolist())
        if envs:
            outcome = Outcome.NEAR_TIE if near_tie_envs.issuperset(envs) else Outcome.MISMATCH
        else:
            outcome = Outcome.EXACT if exact[name] else Outcome.WITHIN_TOLERANCE
        report.fields.append(FieldStep(step, name, outcome, diffs.get(name), envs))
