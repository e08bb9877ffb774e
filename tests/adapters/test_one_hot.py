"""One-hot blocks as indices: a block that is not one-hot becomes an index out of range."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.adapters.one_hot import folded_indices, is_one_hot


@settings(max_examples=80, deadline=None)
@given(
    nvec=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    rows=st.integers(1, 6),
    data=st.data(),
    dtype=st.sampled_from([torch.int64, torch.float32, torch.bool, torch.uint8]),
)
def test_each_block_gives_its_one_index_or_its_size(nvec, rows, data, dtype):
    values = data.draw(
        st.lists(
            st.lists(st.sampled_from([0, 1, 2, -1]), min_size=sum(nvec), max_size=sum(nvec)),
            min_size=rows,
            max_size=rows,
        )
    )
    if dtype in (torch.bool, torch.uint8):
        values = [[abs(v) % 2 for v in row] for row in values]
    actions = torch.tensor(values).to(dtype)
    indices = folded_indices(actions, nvec)
    assert indices.shape == (rows, len(nvec)) and indices.dtype == torch.int64
    for r, row in enumerate(values):
        start = 0
        for h, n in enumerate(nvec):
            block = row[start : start + n]
            start += n
            one_hot = sorted(block) == [0] * (n - 1) + [1]
            expected = block.index(1) if one_hot else n
            assert int(indices[r, h]) == expected, (block, int(indices[r, h]))
            assert bool(is_one_hot(actions[r, start - n : start])) == one_hot
