"""The GPU's prepared step launch (``kernels/cuda.py``), with a fake dispatcher: no GPU here.

Proven: the kernel is compiled once, for the types of the arguments, its driver arguments are
marshalled once in order, and each call is one ``cuda.core`` launch of them on the given stream
with the step's configuration. Not proven: numba-cuda's marshalling and the launch on a GPU
(``gpu-envs device-check --full`` runs them).
"""

from types import SimpleNamespace

import cuda.core
import numpy as np

from gpu_envs.kernels import cuda as drivers


class FakeDispatcher:
    """Records ``compile``; its kernel flattens each argument to its repr."""

    def __init__(self):
        self.compiled = []
        function = SimpleNamespace(kernel="the cufunc")
        self.kernel = SimpleNamespace(
            argument_types=None,
            _prepare_args=lambda ty, value, stream, retr, out: out.append((ty, repr(value))),
            _codelibrary=SimpleNamespace(get_cufunc=lambda: function),
        )

    def typeof_pyval(self, value):
        return type(value).__name__

    def compile(self, signature):
        self.compiled.append(signature)
        self.kernel.argument_types = signature
        return self.kernel


def test_the_step_is_marshalled_once_and_launched_as_prepared(monkeypatch):
    launches = []
    monkeypatch.setattr(cuda.core, "launch", lambda *args: launches.append(args))
    dispatcher, args = FakeDispatcher(), (7, (np.zeros(3), 2))
    launch = drivers._prepared_launch(dispatcher, args, grid=4, block=256, shared=0)
    assert dispatcher.compiled == [("int", "tuple")]
    for stream in ("s1", "s2"):
        launch(stream)
    assert [a[0] for a in launches] == ["s1", "s2"]
    stream, config, function, *flat = launches[0]
    assert function == "the cufunc" and flat == [("int", "7"), ("tuple", repr(args[1]))]
    assert config.grid == (4, 1, 1) and config.block == (256, 1, 1) and config.shmem_size == 0
    assert dispatcher.compiled == [("int", "tuple")]  # compiled once
