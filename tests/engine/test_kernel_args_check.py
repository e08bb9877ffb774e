"""The engine checks the logic's ``KernelArgs`` against the env's declaration by name and type:
swapped settings (of the same dtype) or constants, a missing argument, a buffer of another dtype,
constants or settings given as a tuple (unnamed)."""

import numpy as np
import pytest

from gpu_envs.games.mountain_car import MountainCarVectorEnv


class SwappedSettings(MountainCarVectorEnv):
    def settings(self):
        return {"autoreset_mode": self.autoreset_code, "max_episode_steps": self.max_episode_steps}


class SwappedConstants(MountainCarVectorEnv):
    def constants(self):
        return {"reset_bounds": self._bounds, "consts": self._consts}


class MissingSetting(MountainCarVectorEnv):
    def settings(self):
        return {"max_episode_steps": self.max_episode_steps}


class SettingAsConstant(MountainCarVectorEnv):
    def settings(self):
        return {"max_episode_steps": self.max_episode_steps, "autoreset_mode": self._bounds}


def test_two_swapped_int_settings_are_an_error_naming_them():
    with pytest.raises(
        TypeError,
        match=r"14: 'max_episode_steps' where the env passes "
        r"'autoreset_mode'; 15: 'autoreset_mode' where the env passes "
        r"'max_episode_steps'",
    ):
        SwappedSettings(2)


def test_swapped_constants_and_a_missing_setting_are_errors():
    with pytest.raises(TypeError, match=r"'consts' where the env passes 'reset_bounds'"):
        SwappedConstants(2)
    with pytest.raises(TypeError, match="the kernels get 15 arguments"):
        MissingSetting(2)


def test_an_array_where_a_setting_belongs_is_an_error():
    with pytest.raises(
        TypeError, match=r"KernelArgs.autoreset_mode must be a setting \(a scalar\)"
    ):
        SettingAsConstant(2)


def test_the_declared_env_passes_and_unnamed_declarations_are_refused():
    env = MountainCarVectorEnv(2)
    assert len(env.kernel_args) == len(env.logic.KernelArgs._fields)
    assert np.dtype(env.kernel_args[0].dtype) == np.float64

    class PositionalSettings(MountainCarVectorEnv):
        def settings(self):
            return (self.max_episode_steps, self.autoreset_code)

    class PositionalConstants(MountainCarVectorEnv):
        def constants(self):
            return (self._consts, self._bounds)

    for positional, method in (
        (PositionalSettings, "settings"),
        (PositionalConstants, "constants"),
    ):
        with pytest.raises(
            TypeError,
            match=rf"{positional.__name__}\.{method}\(\) returned a tuple: return a mapping keyed "
            r"by the names of the logic's KernelArgs fields",
        ):
            positional(2)
