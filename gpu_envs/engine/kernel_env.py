"""The engine under every gpu-envs env: a batch of games whose step is a Numba kernel.

A game subclasses :class:`KernelEnv` and declares only what is its own:

- ``game``: a name (it keys the compiled kernels in numba's disk cache);
- ``logic``: its step logic, a module (or any object) with two
  :func:`~gpu_envs.kernels.targets.kernel_function`\\ s ``step_envs(start, stop, envs)`` and
  ``reset_envs(start, stop, mask, envs)``, and ``KernelArgs``, the namedtuple class of ``envs``
  (see ``docs/write-an-env.md``);
- :meth:`buffer_layout`: every per-env array the kernels keep (state, outputs, scratch), by name,
  with its shape and NumPy dtype; ``KernelArgs`` starts with them in this order, then ``actions``;
- :meth:`constants`: NumPy arrays the kernels read (copied to the device once, and again by
  :meth:`update_constants`), then :meth:`settings`: scalars, each a mapping keyed by the
  ``KernelArgs`` names; ``KernelArgs`` ends with them;
- its spaces (``single_observation_space``, ``single_action_space``) and optionally
  ``render_frames``.

The engine owns the rest, once for every game: device and dtype resolution, the CPU or CUDA driver,
per-env seeding and episode counters (the ``env_seed`` and ``episode`` buffers, uint64 views of
int64 tensors), reset masks, the three autoreset modes (the ``autoreset_mode`` setting the logic
reads), validation of actions, fresh output tensors per step (or, with
:attr:`KernelEnv.copy_outputs` off, the env's own buffers), outputs the caller may edit in place
without changing the env (as gymnasium's vector envs), launches on torch's current stream,
``close()``, pickling and ``copy.deepcopy`` (a copy steps on exactly like the original), and the
``array`` keyword of every game's class, so of ``gym.make_vec`` with the class as entry point
(``"numpy"``: the NumPy face, :mod:`gpu_envs.engine.numpy_face`).
"""

from __future__ import annotations

import copy
import secrets
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gpu_envs.engine import devices, first_compile
from gpu_envs.engine.numpy_face import ArrayFaces
from gpu_envs.engine.recycled_outputs import RecycledOutputs
from gpu_envs.engine.validation import (
    AUTORESET_CODES,
    ActionCheck,
    as_bool,
    as_reset_mask,
    check_all_reset,
    check_options,
    check_positive_int,
    one_read,
    parse_autoreset_mode,
    per_env_seeds,
    raise_out_of_range,
)

#: Buffers every game has: the engine seeds and counts episodes with them.
ENGINE_BUFFERS = ("needs_reset", "episode", "env_seed")
#: NumPy dtypes the kernels see, and the torch dtype that stores each (uint64 in int64 storage).
_TORCH_STORAGE = {
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint64): torch.int64,
}


def episode_buffers(
    num_envs: int, obs_shape: tuple[int, ...], reward_dtype=np.float32
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The buffers every single-agent game has, in ``args`` order: the engine's counters
    (``needs_reset``, ``episode``, ``env_seed``) and the outputs (``obs`` float32 of ``obs_shape``,
    ``rewards``, ``terminated``, ``truncated``, ``final_obs``, ``has_final_obs``)."""
    n, flag = num_envs, np.dtype(np.bool_)
    obs = ((n, *obs_shape), np.dtype(np.float32))
    return {
        "needs_reset": ((n,), flag),
        "episode": ((n,), np.dtype(np.uint64)),
        "env_seed": ((n,), np.dtype(np.uint64)),
        "obs": obs,
        "rewards": ((n,), np.dtype(reward_dtype)),
        "terminated": ((n,), flag),
        "truncated": ((n,), flag),
        "final_obs": obs,
        "has_final_obs": ((n,), flag),
    }


class Buffers(dict):
    """The env's tensors by name, also readable as attributes (``buffers.obs``)."""

    def __getattr__(self, name: str) -> torch.Tensor:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class KernelEnv(metaclass=ArrayFaces):
    """Base class of the batched envs: ``num_envs`` games stepped by one kernel launch on
    ``device``.

    A game's class also takes ``array`` (:class:`~gpu_envs.engine.numpy_face.ArrayFaces`):
    ``"torch"`` (the default) gives the env, ``"numpy"`` its NumPy face (a gymnasium ``VectorEnv``
    on the CPU), as ``gym.make_vec(..., array="numpy")`` does with the class as entry point.

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable, else CPU).
        autoreset_mode: ``AutoresetMode`` NEXT_STEP (default), SAME_STEP or DISABLED, or its name.
        render_mode: None or one of ``metadata["render_modes"]``.
        validate_actions: check the actions' values before each step (their shape and dtype are
            always checked). On CUDA the value checks (with the finished-env check of DISABLED
            autoreset) cost one host synchronisation per step between them.
    """

    game: ClassVar[str]
    logic: ClassVar[Any]
    #: Outputs a step returns, in this order: (obs, rewards, terminated, truncated).
    step_outputs: ClassVar[tuple[str, ...]] = ("obs", "rewards", "terminated", "truncated")
    #: SAME_STEP outputs: the ``info`` key of each buffer (``_final_obs`` flags the ended envs).
    final_outputs: ClassVar[dict[str, str]] = {
        "final_obs": "final_obs",
        "_final_obs": "has_final_obs",
    }
    #: Which worker shape the CUDA kernel has: "thread" (one per env) or "block" (one per env, a
    #: thread per agent, ``cuda_shared_slots`` rows of agents in shared memory).
    cuda_shape: ClassVar[str] = "thread"
    cuda_shared_slots: ClassVar[int] = 0
    #: Whether ``step_envs`` writes every entry of the :attr:`step_outputs` of every env on every
    #: step. Then the CPU kernel writes each step's outputs into new arrays that become the returned
    #: tensors (no copy); otherwise the returned tensors are copies of the buffers.
    step_writes_every_output: ClassVar[bool] = False
    #: Buffers that are only the kernels' scratch (left out of :meth:`state_snapshot`).
    scratch_buffers: ClassVar[tuple[str, ...]] = ()
    #: Buffers stored component-major ([components, num_envs], e.g. a state GPU threads read
    #: coalesced); :meth:`state_snapshot` gives them env first.
    component_major_buffers: ClassVar[tuple[str, ...]] = ()
    _copy_outputs: bool = True
    #: ``(weak reference, name)`` of the consumers that keep outputs across steps (adapters),
    #: registered by :func:`require_copied_outputs`: while one lives, copy_outputs stays on.
    _output_holders: tuple[tuple[weakref.ref, str], ...] = ()
    #: The CPU step's outputs written into new arrays (see :meth:`update_constants`).
    _fresh_outputs: tuple = ()
    _own_obs: np.ndarray
    #: CPU loops: envs per call of ``step_envs``, and the batch size from which threads are used.
    cpu_block_size: ClassVar[int] = 512
    cpu_parallel_min_envs: ClassVar[int] = 4096
    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    #: Agents per env (multi-agent games set it; "block"-shaped CUDA kernels use it).
    num_agents: int = 1
    single_observation_space: gym.Space
    single_action_space: gym.Space
    observation_space: gym.Space
    action_space: gym.Space

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
    ):
        self.num_envs = check_positive_int(num_envs, "num_envs")
        self.device = devices.resolve_device(device)
        self.kernel_target = devices.kernel_target(device)
        # The CPU kernels' step; the CUDA branch also serves the simulated device (CPU tensors).
        self._on_cpu = self.kernel_target == "cpu"
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got "
                f"{render_mode!r}"
            )
        self.render_mode = render_mode
        self.validate_actions = as_bool(validate_actions, "validate_actions")
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self._closed = False

    # ----------------------------------------------------------------------------- the game's part
    def buffer_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Every array the kernels keep, ``name -> (shape, NumPy dtype)``, in ``args`` order.

        Must hold ``needs_reset`` [E] bool, ``episode`` and ``env_seed`` [E] uint64, the
        :attr:`step_outputs` and the :attr:`final_outputs` buffers.
        """
        raise NotImplementedError

    def constants(self) -> Mapping[str, np.ndarray]:
        """Arrays the kernels read (game constants, reset bounds), after the actions in ``args``,
        by their ``KernelArgs`` names (the engine checks them against ``KernelArgs``)."""
        return {}

    def settings(self) -> Mapping[str, Any]:
        """Scalars the kernels read, last in ``args``, by their ``KernelArgs`` names (checked);
        must include ``self.autoreset_code`` as ``autoreset_mode``."""
        return {"autoreset_mode": self.autoreset_code}

    def action_layout(self) -> tuple[tuple[int, ...], torch.dtype]:
        """Shape and dtype of the actions of one step (by default from the single action space)."""
        space = self.single_action_space
        if isinstance(space, gym.spaces.Discrete):
            return (self.num_envs,), torch.int64
        if isinstance(space, gym.spaces.MultiDiscrete):
            return (self.num_envs, *space.shape), torch.int64
        if isinstance(space, gym.spaces.Box):
            return (self.num_envs, *space.shape), torch.float32
        raise NotImplementedError(f"no default action layout for {space}")

    def render_frames(self) -> tuple[np.ndarray, ...]:
        """One RGB frame (H, W, 3 uint8) per env."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------- set-up
    def _build(self) -> None:
        """Allocate the buffers and load the driver; a game's ``__init__`` calls it last."""
        layout = self.buffer_layout()
        missing = [
            name
            for name in (*ENGINE_BUFFERS, *self.step_outputs, *self.final_outputs.values())
            if name not in layout
        ]
        if missing:
            raise TypeError(f"{type(self).__name__}.buffer_layout() lacks the buffers {missing}")
        unsupported = {
            n: str(np.dtype(d)) for n, (_, d) in layout.items() if np.dtype(d) not in _TORCH_STORAGE
        }
        if unsupported:
            raise TypeError(
                f"{type(self).__name__}.buffer_layout(): buffers {unsupported} have dtypes the "
                f"kernels do not take; use one of {sorted(str(d) for d in _TORCH_STORAGE)}"
            )
        self._check_observation_layout(layout)
        self._layout = layout
        _check_memory(layout, self.device, type(self).__name__)
        self._tensors = Buffers(
            {
                name: torch.zeros(shape, dtype=_TORCH_STORAGE[np.dtype(dtype)], device=self.device)
                for name, (shape, dtype) in layout.items()
            }
        )
        if isinstance(self, VectorEnv):  # the gymnasium face: batched spaces of the single ones
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
            self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._action_shape, self._action_dtype = self.action_layout()
        self._actions = torch.zeros(
            self._action_shape, dtype=self._action_dtype, device=self.device
        )
        self._make_views()
        self.update_constants()
        self._check_kernel_args()
        self._entropy_seed = secrets.randbits(62)
        self._seeded = False
        self._is_reset = False
        #: [num_envs] bool: the envs a first reset with a mask left without a game (else None)
        self._unstarted: torch.Tensor | None = None

    def _make_views(self) -> None:
        """The kernels' zero-copy views of the buffers and actions (in the GPU's numba context),
        the first ``args``; the driver; the action checks."""
        with devices.numba_context(self.device):
            buffer_views = [self._kernel_view(name) for name in self._layout]
            self._kernel_args = (*buffer_views, devices.kernel_view(self._actions))
        self._driver = self._load_driver()
        self._action_check = ActionCheck(self.single_action_space, self._action_shape, self.device)
        # The game keeps the engine's check_actions: the CPU step converts and checks in one pass.
        self._default_action_check = type(self).check_actions is KernelEnv.check_actions
        # The CPU step's checked loop: the actions buffer's view gives the actions' type and shape,
        # and, for integer actions checked the engine's way, the loop range-checks them itself.
        upper = self._action_check.upper
        self._actions_view = self._kernel_args[len(self._layout)]
        self._action_upper = np.asarray(-1 if upper is None else upper, np.int64).reshape(-1)
        self._kernel_checks_actions = (
            self._on_cpu
            and self._default_action_check
            and not self._action_check.box
            and upper is not None
            and self._action_dtype is torch.int64
        )
        # with validation, DISABLED autoreset checks the actions here before the finished envs
        self._validated_in_place = (
            self._kernel_checks_actions and self.autoreset_mode is not AutoresetMode.DISABLED
        )

    def _check_observation_layout(self, layout: dict[str, tuple[tuple[int, ...], Any]]) -> None:
        """The observation buffers must hold what ``single_observation_space`` declares: ``obs``
        (and ``final_obs``) of shape ``[num_envs, *space.shape]`` (``[num_envs, num_agents,
        *space.shape]`` for several agents per env) and the space's dtype."""
        name = type(self).__name__
        space = getattr(self, "single_observation_space", None)
        if not isinstance(space, gym.spaces.Space) or space.shape is None:
            raise TypeError(
                f"{name}.single_observation_space must be a gymnasium space with a shape (a Box), "
                f"set in __init__ before _build(); got {space!r}"
            )
        shape, dtype = tuple(space.shape), np.dtype(space.dtype)
        allowed = [(self.num_envs, *shape)]
        if self.num_agents > 1:
            allowed.append((self.num_envs, self.num_agents, *shape))
        for buffer in filter(None, (self.step_outputs[0], self.final_outputs.get("final_obs"))):
            buffer_shape, buffer_dtype = layout[buffer]
            if tuple(buffer_shape) not in allowed or np.dtype(buffer_dtype) != dtype:
                raise TypeError(
                    f"{name}: single_observation_space {space} declares observations of shape "
                    f"{shape} and dtype {dtype}, but buffer_layout()'s {buffer!r} buffer is "
                    f"{tuple(buffer_shape)} {np.dtype(buffer_dtype)}; it must be "
                    f"{' or '.join(map(str, allowed))} {dtype}: make the space and the buffer agree"
                )

    def _check_kernel_args(self) -> None:
        """The logic's ``KernelArgs`` must name the arguments the engine passes, in order: the
        buffers of :meth:`buffer_layout`, ``actions``, then the constants and settings by their
        names; each buffer's kernel view must have its declared dtype, each constant be an array
        and each setting a scalar."""
        fields = tuple(type(self).logic.KernelArgs._fields)
        constants = self._named_arguments("constants")
        declared = (*self._layout, "actions", *constants, *self._named_arguments("settings"))
        mismatched = [
            f"{index}: {field!r} where the env passes {name!r}"
            for index, (field, name) in enumerate(zip(fields, declared))
            if field != name
        ]
        if mismatched or len(fields) != len(declared):
            raise TypeError(
                f"{type(self).__name__}.logic.KernelArgs has the fields {fields}; the kernels get "
                f"{len(declared)} arguments: the buffers of buffer_layout() in order, 'actions', "
                f"then the constants and settings, named {declared}"
                + (f" (mismatched fields {'; '.join(mismatched)})" if mismatched else "")
            )
        for name, view in zip(self._layout, self._kernel_args):
            if np.dtype(view.dtype) != np.dtype(self._layout[name][1]):
                raise TypeError(
                    f"{type(self).__name__}: buffer {name!r} reaches the kernels as {view.dtype}, "
                    f"declared {np.dtype(self._layout[name][1])}"
                )
        arguments = zip(fields[len(self._layout) + 1 :], self._kernel_args[len(self._layout) + 1 :])
        for index, (field, value) in enumerate(arguments):
            is_constant = index < len(constants)
            if is_constant == isinstance(value, (bool, int, float, np.generic)):
                kind = "constant (an array)" if is_constant else "setting (a scalar)"
                raise TypeError(
                    f"{type(self).__name__}: KernelArgs.{field} must be a {kind}, got "
                    f"{type(value).__name__}"
                )

    def _named_arguments(self, method: str) -> Mapping[str, Any]:
        """What :meth:`constants` or :meth:`settings` (``method``) returns: a mapping, or a
        ``TypeError``."""
        arguments = getattr(self, method)()
        if not isinstance(arguments, Mapping):
            raise TypeError(
                f"{type(self).__name__}.{method}() returned a {type(arguments).__name__}: return "
                "a mapping keyed by the names of the logic's KernelArgs fields"
            )
        return arguments

    def _kernel_view(self, name: str):
        view = devices.kernel_view(self._tensors[name])
        return view.view(np.uint64) if np.dtype(self._layout[name][1]) == np.uint64 else view

    def _load_driver(self):
        logic = type(self).logic
        if self.kernel_target == "cpu":
            from gpu_envs.kernels import cpu

            return cpu.make_driver(
                self.game,
                logic.step_envs,
                logic.reset_envs,
                logic.KernelArgs,
                self.cpu_block_size,
                self.cpu_parallel_min_envs,
            )
        from gpu_envs.kernels import cuda

        if (
            devices.simulated_cuda()
        ):  # the simulator runs the RNG's wrapping uint64 arithmetic in NumPy
            warnings.filterwarnings(
                "ignore", "overflow encountered", RuntimeWarning, "gpu_envs.kernels.rng"
            )
        driver = cuda.make_driver(
            self.game,
            logic.step_envs,
            logic.reset_envs,
            logic.KernelArgs,
            self.cuda_shape,
            self.cuda_shared_slots,
        )
        if self.cuda_shape == "block" and self.num_agents > driver.max_agents():
            raise ValueError(
                f"{type(self).__name__} on CUDA keeps an env's agents in shared memory: at most "
                f"{driver.max_agents()} agents, got {self.num_agents}; use device='cpu'"
            )
        return driver

    #: How many times :meth:`update_constants` handed the kernels a different argument (a new
    #: device array for a constant, a changed setting). A captured CUDA graph replays the
    #: arguments of its capture: it is valid while this count is unchanged
    #: (:class:`gpu_envs.engine.cuda_graphs.CapturedStep` checks it).
    kernel_args_generation: int = 0

    def update_constants(self) -> None:
        """Send :meth:`constants` and :meth:`settings` to the kernels (after changing them).

        On CUDA a constant is copied, on the launch stream, into the device array the kernels
        already read when its shape, strides and dtype are unchanged: its address stays, so a
        prepared launch or a captured graph reads the new values."""
        constants = tuple(self._named_arguments("constants").values())
        names = list(self._layout)
        self._actions_index = len(names)
        previous = self._kernel_args[self._actions_index + 1 :]
        if self.kernel_target == "cuda":
            olds = (*previous[: len(constants)], *(None,) * (len(constants) - len(previous)))
            with devices.numba_context(self.device):  # copied on the launch stream: no host sync
                stream = devices.launch_stream(self.device)
                constants = tuple(
                    _device_constant(array, old, stream) for array, old in zip(constants, olds)
                )
        arguments = (*constants, *self._named_arguments("settings").values())
        if not _same_arguments(previous, arguments):
            self.kernel_args_generation += 1
        self._kernel_args = (*self._kernel_args[: self._actions_index + 1], *arguments)
        # (args index, shape, dtype) of the outputs each CPU step writes into new arrays
        self._fresh_outputs = (
            tuple((names.index(name), *self._layout[name]) for name in self.step_outputs)
            if self._on_cpu and self.step_writes_every_output
            else ()
        )
        self._launch = {} if self.kernel_target == "cpu" else {"num_agents": self.num_agents}
        self._empty_info = (
            type(self).after_step is KernelEnv.after_step
            and type(self).step_info is KernelEnv.step_info
            and self.autoreset_mode is not AutoresetMode.SAME_STEP
        )
        # compiled for the argument types at the next CPU step; prepared at the next CUDA step
        # (the CPU step loop compiled for an array of actions, and for an address)
        self._cpu_step: list[Callable[..., bool] | None] = [None, None]
        self._cuda_step: Callable[[object], None] | None = None
        self._bind_step_args()

    def _bind_step_args(self) -> None:
        """The CPU step's arguments around the actions, and the step's outputs (the buffers),
        bound once: made again whenever a buffer or constant is replaced."""
        args, index = self._kernel_args, self._actions_index
        self._args_before, self._args_after = args[:index], args[index + 1 :]
        self._output_tensors = tuple(self._tensors[name] for name in self.step_outputs)
        self._recycled_outputs = (
            RecycledOutputs(self._args_before, self._fresh_outputs) if self._fresh_outputs else None
        )
        if self._fresh_outputs:
            # The env's own observations: a step with fresh outputs hands its new obs array to
            # the caller and copies it here, so that an edit of what the caller got changes nothing.
            self._own_obs = self._tensors[self.step_outputs[0]].numpy()

    @property
    def kernel_args(self) -> tuple:
        """The arguments the kernels get after the env range (and the reset mask), in order:
        the buffers' kernel views, the actions, the constants, the settings (the drivers hand
        them to the logic as its ``KernelArgs``)."""
        return self._kernel_args

    @property
    def autoreset_code(self) -> int:
        """The kernels' integer code of :attr:`autoreset_mode`."""
        return AUTORESET_CODES[self.autoreset_mode]

    # ----------------------------------------------------------------------------- API
    @property
    def copy_outputs(self) -> bool:
        """Whether :meth:`step` and :meth:`reset` return fresh tensors (True, the default: the
        caller may keep them, and edit them in place without changing the env) or the env's own
        output buffers (False: no allocation or copy per step; the tensors are overwritten by the
        next step or reset, so read or copy them before that, and an edit of them edits the env).
        Set it on the instance. Turning it off is refused while an adapter that keeps outputs
        across steps (:func:`require_copied_outputs`) holds the env."""
        return self._copy_outputs

    @copy_outputs.setter
    def copy_outputs(self, value: bool) -> None:
        value = as_bool(value, "copy_outputs")
        holders = [name for holder, name in self._output_holders if holder() is not None]
        if holders and not value:
            raise ValueError(
                f"copy_outputs=False refused: {holders[0]} keeps each step's outputs across steps "
                f"and holds this {type(self).__name__}, whose every step would then overwrite "
                "what it kept; leave copy_outputs at True (or give it an env of its own)"
            )
        if self._fresh_outputs and self._copy_outputs and not value and not self._closed:
            self._rebind(self.step_outputs[0], self._own_obs)  # the step writes the env's own obs
        self._copy_outputs = value

    def hold_copied_outputs(self, holder: object, consumer: str) -> None:
        """Keep :attr:`copy_outputs` on while ``holder`` (the object of ``consumer``, which keeps
        a step's outputs while the next step runs) lives; refused when it is off already."""
        if not self._copy_outputs:
            raise ValueError(
                f"{consumer} keeps each step's outputs across steps, but "
                f"{type(self).__name__}.copy_outputs is False (every step overwrites the last "
                "one's tensors): leave copy_outputs at True for it"
            )
        alive = tuple(entry for entry in self._output_holders if entry[0]() is not None)
        self._output_holders = (*alive, (weakref.ref(holder), consumer))

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs, or those in ``options["reset_mask"]`` ([num_envs] bool).

        ``seed=s`` seeds env ``i`` with ``s + i`` (a sequence gives one seed per env); env ``i``'s
        start states then depend only on its own seed and episode count. Other options are the
        game's (:meth:`apply_reset_options`). Returns ``(obs, info)``.

        A masked reset before every env was ever reset (a first reset with a mask) seeds every env
        but starts only the masked ones, as gymnasium's vector envs reset only the masked
        sub-envs: the others hold no game yet (their rows of ``obs`` are zeros), and :meth:`step`
        refuses to run, naming them, until resets have started every env. Resetting them later
        gives each the start state a full first reset with the same seed would have.
        """
        self._check_open()
        options = check_options(options)
        mask_option = options.pop("reset_mask", None) if "reset_mask" in options else True
        self.apply_reset_options(options)
        if mask_option is True:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        else:
            mask = as_reset_mask(mask_option, self.num_envs, self.device)
        if seed is None and not self._seeded:
            seed = self.default_seed()
        if seed is not None:
            # the first seeding covers every env, so that envs outside a first partial reset
            # still get their own seeds (not all the same start state)
            self.seed_envs(mask if self._seeded else torch.ones_like(mask), seed)
        if self._fresh_outputs and self._copy_outputs:  # the last step's obs is the caller's
            self._rebind(self.step_outputs[0], self._own_obs)  # (lean: the kernels' already)
        first_compile.announce(self.game, self.kernel_target, self._driver)
        with devices.numba_context(self.device):
            self._driver.reset(
                self.num_envs,
                devices.kernel_view(mask),
                self._kernel_args,
                **self._launch,
                **self._stream(),
            )
        self._tensors.has_final_obs.masked_fill_(mask, False)
        if mask_option is True:
            self._is_reset, self._unstarted = True, None
        elif not self._is_reset:  # a reset with a mask before every env was started
            unstarted = ~mask if self._unstarted is None else self._unstarted & ~mask
            self._is_reset = not bool(unstarted.any())
            self._unstarted = None if self._is_reset else unstarted
        obs = self._tensors.obs
        return devices.fresh_copy(obs) if self._copy_outputs else obs, self.reset_info()

    def _layout_index(self, name: str) -> int:
        return list(self._layout).index(name)

    def _rebind(self, name: str, array: np.ndarray) -> None:
        """Make the NumPy ``array`` the CPU buffer ``name`` (the kernels' view and the tensor)."""
        index = self._layout_index(name)
        self._kernel_args = (*self._kernel_args[:index], array, *self._kernel_args[index + 1 :])
        self._tensors[name] = torch.from_numpy(array)
        self._bind_step_args()

    def apply_reset_options(self, options: dict[str, Any]) -> None:
        """Apply the game's reset options (all but ``reset_mask``); none by default."""
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}: allowed reset_mask")

    def default_seed(self) -> int:
        """The seed of the first reset without one: fresh entropy, drawn at construction."""
        return self._entropy_seed

    def seed_envs(self, mask: torch.Tensor, seed) -> torch.Tensor:
        """Seed the masked envs (env ``i`` gets ``seed + i``) and restart their episode counts."""
        seeds = per_env_seeds(seed, self.num_envs, self.device, self.env_noun)
        self._tensors.env_seed.copy_(torch.where(mask, seeds, self._tensors.env_seed))
        self._tensors.episode.masked_fill_(mask, 0)
        self._seeded = True
        return seeds

    env_noun: ClassVar[str] = "env"

    def reset_info(self) -> dict[str, Any]:
        """The ``info`` of :meth:`reset`."""
        return {}

    def step(self, actions):
        """Advance every env by one step; returns ``(obs, rewards, terminated, truncated,
        info)``."""
        if self._closed or not self._is_reset:
            self._check_open()
            self._check_started()
            raise RuntimeError("call reset() before step()")
        outputs = self._step_on_cpu(actions) if self._on_cpu else self._step_on_cuda(actions)
        if self._empty_info:  # the hooks are the engine's and the mode adds nothing to the info
            return (*outputs, {})
        obs, rewards, terminated, truncated = outputs
        self.after_step()
        info = self.step_info()
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            t = self._tensors
            give = devices.fresh_copy if self._copy_outputs else _same
            info.update({key: give(t[name]) for key, name in self.final_outputs.items()})
        return obs, rewards, terminated, truncated, info

    def check_actions(self, actions) -> torch.Tensor:
        """The actions as the kernel reads them; shape and dtype always checked, values when
        ``validate_actions`` (a clear error names the first bad entry)."""
        return self._action_check.tensor(actions, self.validate_actions)

    def clear_finished(self) -> None:
        """Let finished envs step on without a reset (autoreset DISABLED; gymnasium's single envs
        step on after termination, with a warning)."""
        self._tensors.needs_reset.fill_(False)

    def _check_finished_envs(self) -> None:
        """With autoreset DISABLED (and ``validate_actions``), refuse to step a finished env."""
        if self.autoreset_mode is AutoresetMode.DISABLED and self.validate_actions:
            check_all_reset(self._tensors.needs_reset, self.env_noun)

    def prepare_launch(self) -> None:
        """Prepare the CUDA step's launch now rather than at the next step (before a CUDA-graph
        capture, which must see the launch only); nothing on the CPU."""
        if self.kernel_target == "cuda" and self._cuda_step is None:
            with devices.numba_context(self.device):
                self._cuda_step = self._prepare_step()

    def _prepare_step(self) -> Callable[[object], None]:
        return self._driver.prepare_step(self.num_envs, self._kernel_args, **self._launch)

    def _step_on_cuda(self, actions) -> list[torch.Tensor]:
        """One CUDA step (also the simulated device's): the checks' flags are read back once."""
        with one_read(self.device):  # the input first, then the envs' state
            actions = self.check_actions(actions)
            self._check_finished_envs()
        self._actions.copy_(actions)
        with devices.numba_context(self.device):
            launch = self._cuda_step
            if launch is None:
                launch = self._cuda_step = self._prepare_step()
            launch(devices.launch_stream(self.device))
        give = devices.fresh_copy if self._copy_outputs else _same
        return [give(self._tensors[name]) for name in self.step_outputs]

    def _step_on_cpu(self, actions) -> tuple[torch.Tensor, ...]:
        """One CPU step (the kernel reads the caller's actions in place); returns the outputs.

        The common input (a C-contiguous CPU tensor or writable NumPy array of the kernel's action
        dtype and shape, integer action spaces) goes to the checked step loop as it is: a tensor as
        its address (no NumPy view made per step), and its range check runs inside that loop,
        before any env moves (``kernels.cpu.CPUDriver``). Any other input
        is converted and checked here first. The loop is called without numba's per-call typing:
        the arguments keep the types it was compiled for (the address an int, fresh outputs new C
        arrays of their buffers' dtypes).
        """
        validate = self.validate_actions
        # (DISABLED with validation checks the actions before the finished envs, as before)
        reads_in_place = self._validated_in_place if validate else self._kernel_checks_actions
        source: Any = self._action_check.in_place_source(actions) if reads_in_place else None
        check = validate and source is not None
        if source is None:
            if self._default_action_check:
                source = self._action_check.kernel_array(actions, validate)
            else:
                source = self.check_actions(actions).to(self._action_dtype).contiguous().numpy()
            self._check_finished_envs()
        recycled = self._recycled_outputs if self._copy_outputs else None
        if recycled is None:
            before = self._args_before
        else:  # new output arrays, or an earlier step's that nothing outside the env holds
            before, fresh = recycled.take()
        args = (self.num_envs, before, self._actions_view, self._args_after, source)
        kind = type(source) is int  # 1: an address, 0: an array (compiled once each)
        step = self._cpu_step[kind]
        if step is None:
            step = self._cpu_step[kind] = self._driver.prepared_step(
                *args, self._action_upper, check
            )
        if step(*args, self._action_upper, check):
            shown = actions if kind else torch.from_numpy(source)
            raise_out_of_range(shown, torch.as_tensor(self._action_check.upper), "actions")
        if recycled is None:
            if self._copy_outputs:
                return tuple(map(devices.fresh_copy, self._output_tensors))
            return self._output_tensors
        self._output_tensors = outputs = tuple(map(torch.from_numpy, fresh))
        np.copyto(self._own_obs, fresh[0])  # the caller may edit its obs: the env keeps its own
        tensors, (_, rewards, terminated, truncated) = self._tensors, self.step_outputs
        _, tensors[rewards], tensors[terminated], tensors[truncated] = outputs
        self._args_before = before
        self._kernel_args = (*before, self._actions_view, *self._args_after)
        return outputs

    def _check_started(self) -> None:
        """Refuse to step while envs that a first reset with a mask left out hold no game."""
        if self._unstarted is None:
            return
        left = self._unstarted.nonzero().flatten().tolist()
        shown = ", ".join(map(str, left[:10])) + (", ..." if len(left) > 10 else "")
        noun = self.env_noun
        raise RuntimeError(
            f"{len(left)} {noun}(s) were never reset ({noun}s {shown}): a reset with "
            f"options['reset_mask'] starts only the masked {noun}s; reset them (or call reset() "
            "without a mask) before step()"
        )

    def after_step(self) -> None:
        """Hook run after each step's kernel (e.g. to report an error flag the kernel set)."""

    def step_info(self) -> dict[str, Any]:
        """The ``info`` of :meth:`step` (SAME_STEP's final outputs are added by the engine)."""
        return {}

    def _stream(self) -> dict:
        return {} if self.kernel_target == "cpu" else {"stream": devices.launch_stream(self.device)}

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed; make a new one")

    def state_snapshot(self) -> dict[str, torch.Tensor]:
        """Copies of every buffer the kernels keep but scratch, by name, env first ([num_envs,
        ...]):
        the public way to read an env's whole state (e.g. to check CPU against CUDA)."""
        self._check_open()
        return {
            name: (tensor.T if name in self.component_major_buffers else tensor).clone(
                memory_format=torch.contiguous_format
            )
            for name, tensor in self._tensors.items()
            if name not in self.scratch_buffers
        }

    def buffers_state(self) -> dict[str, torch.Tensor]:
        """Copies of every buffer but scratch, as stored: the envs' whole state for a checkpoint
        (``load_buffers_state`` puts it back and the envs continue bit for bit).

        The observations are the env's own, whatever the caller did to those it was given. A CPU
        step with fresh outputs (classic control) hands out its rewards and flags without a copy
        and never reads them back (the next step writes them whole): those three buffers are the
        last step's as the caller holds them."""
        self._check_open()
        return {
            name: tensor.clone()
            for name, tensor in self._tensors.items()
            if name not in self.scratch_buffers
        }

    def load_buffers_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what ``buffers_state`` returned (an env of the same class, size and dtype)."""
        self._check_open()
        kept = {n: t for n, t in self._tensors.items() if n not in self.scratch_buffers}
        if set(state) != set(kept):
            raise ValueError(
                f"env state: buffers {sorted(state)} do not match this env's {sorted(kept)}"
            )
        for name, tensor in kept.items():
            saved = state[name]
            if not isinstance(saved, torch.Tensor):
                raise TypeError(
                    f"env state: buffer {name!r} must be a torch.Tensor (as buffers_state gives "
                    f"it), got {type(saved).__name__}; torch.from_numpy converts an array"
                )
            if saved.shape != tensor.shape or saved.dtype != tensor.dtype:
                raise ValueError(
                    f"env state: buffer {name!r} is {tuple(saved.shape)} {saved.dtype}, this "
                    f"env's is {tuple(tensor.shape)} {tensor.dtype}"
                )
        # CPU steps hand out the output buffers themselves (fresh each step): the caller may hold
        # them, so they are replaced by new arrays rather than written into.
        handed_out = self.step_outputs if self._fresh_outputs and self._copy_outputs else ()
        for name, tensor in kept.items():
            if name in handed_out:
                self._rebind(name, torch.empty_like(tensor).copy_(state[name]).numpy())
            else:
                tensor.copy_(state[name])
        self._seeded = self._is_reset = True
        self._unstarted = None

    def set_episode_steps(self, steps) -> None:
        """Set each env's count of steps in its current episode (the ``elapsed`` buffer that
        truncation at ``max_episode_steps`` counts): [num_envs] integers >= 0, e.g. random counts
        that spread the first time-outs (Isaac Lab's ``init_at_random_ep_len``)."""
        self._check_open()
        if "elapsed" not in self._layout:
            raise TypeError(
                f"{type(self).__name__} keeps no per-env step counter (an 'elapsed' buffer)"
            )
        counts = torch.as_tensor(steps, device=self.device)
        integer = not (
            counts.is_floating_point() or counts.is_complex() or counts.dtype == torch.bool
        )
        if counts.shape != (self.num_envs,) or not integer:
            raise ValueError(
                f"episode steps must be integers of shape ({self.num_envs},), got "
                f"{counts.dtype} of shape {tuple(counts.shape)}"
            )
        if not bool(((counts >= 0) & (counts <= np.iinfo(np.int32).max)).all()):
            raise ValueError(
                f"episode steps must be integers in [0, {np.iinfo(np.int32).max}], got "
                f"{counts.dtype} values from {int(counts.min())} to {int(counts.max())}"
            )
        self._tensors.elapsed.copy_(counts)

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One RGB frame (H, W, 3 uint8) per env when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        self._check_open()
        return self.render_frames()

    def close(self, **kwargs) -> None:
        """Release the buffers; the env cannot be used afterwards."""
        self._closed = self.closed = True
        self._tensors, self._kernel_args = Buffers(), ()
        self._args_before, self._args_after, self._output_tensors = (), (), ()
        self._actions_view = self._recycled_outputs = None
        vars(self).pop("_own_obs", None)

    # ----------------------------------------------------------------------------- copies
    def __getstate__(self) -> dict[str, Any]:
        # Kernel views and the driver are rebuilt in the copy: they alias this env's memory.
        state = {key: value for key, value in self.__dict__.items() if key not in _UNPICKLED}
        if not self._closed:
            state["_tensors"] = Buffers(
                {name: tensor.cpu() for name, tensor in self._tensors.items()}
            )
            state["_actions"] = self._actions.cpu()
        simulated = self.kernel_target == "cuda" and self.device.type == "cpu"
        state["device"] = "cuda" if simulated else str(self.device)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.device = devices.resolve_device(state["device"])
        self.kernel_target = devices.kernel_target(state["device"])
        if self._closed:
            return
        self._tensors = Buffers(
            {name: tensor.to(self.device) for name, tensor in state["_tensors"].items()}
        )
        self._actions = state["_actions"].to(self.device)
        self._make_views()
        self.update_constants()

    def __deepcopy__(self, memo: dict) -> KernelEnv:
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return clone


def _device_constant(array: np.ndarray, old, stream):
    """``array`` for the CUDA kernels: copied into ``old`` (the device array they read now) when
    it has the same shape, strides and dtype, else a new device array."""
    if old is not None and (old.shape, old.strides, old.dtype) == (
        array.shape,
        array.strides,
        array.dtype,
    ):
        old.copy_to_device(array, stream=stream)
        return old
    from numba import cuda

    return cuda.to_device(array, stream=stream)


def _same_arguments(old: tuple, new: tuple) -> bool:
    """Whether the kernels would read the same constants and settings: the same array objects,
    equal scalars of the same type."""
    return len(old) == len(new) and all(
        a is b or (type(a) is type(b) and isinstance(a, (bool, int, float, np.generic)) and a == b)
        for a, b in zip(old, new)
    )


#: What a copy rebuilds: the kernels' views and the driver alias this env's memory or compiled code.
_UNPICKLED = frozenset(
    {
        "_kernel_args",
        "_driver",
        "_launch",
        "_cpu_step",
        "_cuda_step",
        "_args_before",
        "_args_after",
        "_actions_view",
        "_output_tensors",
        "_recycled_outputs",
        "_own_obs",
        "_output_holders",
    }
)


def _same(tensor: torch.Tensor) -> torch.Tensor:
    """An output returned as the env's own buffer (``copy_outputs=False``)."""
    return tensor


def require_copied_outputs(env: Any, consumer: str, holder: object) -> None:
    """For a ``consumer`` that keeps a step's outputs while the next step runs (a rollout
    buffer; ``holder`` is its object): refuse an engine env (``env`` or what it wraps) whose
    ``copy_outputs`` is off, and keep it on while ``holder`` lives
    (:meth:`KernelEnv.hold_copied_outputs`): the next step would overwrite what it kept,
    silently."""
    unwrapped = getattr(env, "unwrapped", env)
    if isinstance(unwrapped, KernelEnv):
        unwrapped.hold_copied_outputs(holder, consumer)


def _check_memory(
    layout: dict[str, tuple[tuple[int, ...], np.dtype]], device: torch.device, name: str
) -> None:
    """Refuse buffers larger than the memory ``device`` has left (a clear error, not the OOM
    killer): on the host, ``MemAvailable`` bounded by the cgroup limit and ``ulimit -v``."""
    needed = sum(
        int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
        for shape, dtype in layout.values()
    )
    free: int | None = (
        torch.cuda.mem_get_info(device)[0]
        if device.type == "cuda"
        else devices.available_cpu_memory()
    )
    if free is None:  # nothing to read: let the allocator decide
        return
    if needed > free:
        raise ValueError(
            f"{name} needs {needed / 2**30:.2f} GiB of buffers on {device}, but only "
            f"{free / 2**30:.2f} GiB are free: use fewer envs (or agents, or a smaller observation)"
        )


class ComponentMajorState:
    """Mixin of a :class:`KernelEnv` whose state is one component-major buffer ``"state"``
    ([components, num_envs]: GPU threads read it coalesced, the CPU loops vectorise over it)."""

    _tensors: Buffers
    device: torch.device

    @property
    def state(self) -> torch.Tensor:
        """The [num_envs, components] state: a view (not contiguous; its ``.T`` is), writes go to
        the envs."""
        return self._tensors.state.T

    @state.setter
    def state(self, value) -> None:
        expected = tuple(self._tensors.state.T.shape)
        value = torch.as_tensor(value, dtype=self._tensors.state.dtype, device=self.device)
        if tuple(value.shape) != expected:
            raise ValueError(f"state must have shape {expected}, got {tuple(value.shape)}")
        self._tensors.state.copy_(value.T)
