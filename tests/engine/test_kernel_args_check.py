"""The engine checks the logic's ``KernelArgs`` against the env's declaration by name and type:
swapped settings (of the same dtype) or constants, a missing argument, a buffer of another dtype."""

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


def test_the_declared_env_passes_and_unnamed_declarations_are_checked_by_count():
    env = MountainCarVectorEnv(2)
    assert len(env.kernel_args) == len(env.logic.KernelArgs._fields)

    class Positional(MountainCarVectorEnv):  # a tuple: checked by position and count only
        def settings(self):
            return (self.max_episode_steps, self.autoreset_code)

    Positional(2)
    assert np.dtype(env.kernel_args[0].dtype) == np.float64
