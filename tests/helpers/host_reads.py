"""Counting the reads a call makes from tensors back to the host (a synchronisation on a GPU)."""

import pytest
import torch

#: The tensor methods that read a value back to the host: a synchronisation on a GPU.
HOST_READS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "cpu")


@pytest.fixture
def count_host_reads(monkeypatch):
    """``count(call, *args)`` runs ``call(*args)`` and returns its result and the names of the
    host reads (:data:`HOST_READS`) it made on tensors."""

    reads: list[str] = []

    def counted(name, method):
        def read(tensor, *args, **kwargs):
            reads.append(name)
            return method(tensor, *args, **kwargs)

        return read

    def count(call, *args):
        reads.clear()
        with monkeypatch.context() as patch:
            for name in HOST_READS:
                patch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
            result = call(*args)
        return result, list(reads)

    return count
