"""Mask.select against slicing the dense mask, and merge_partials: attention over two key parts
(masks from Mask.select), merged, against attention over all keys; the exactness rules; errors."""

import math

import pytest
import torch

import spattn.torch as st
from spattn.torch.partials import _merge_with_torch


def positions(ranges):
    return torch.cat([torch.arange(b, e) for b, e in ranges]) if ranges else torch.zeros(0, dtype=torch.int64)


@pytest.mark.parametrize("spec", ["causal", "sliding_window:w=3", "random:p=0.2,seed=3", "full"])
def test_select_equals_slicing_the_dense_mask(spec):
    mask = st.Mask.from_spec(spec, 23, 29)
    dense = mask.to_dense()
    cases = [
        ([(0, 23)], [(0, 29)]),
        ([(5, 9), (0, 2)], [(20, 29), (3, 3), (0, 7)]),  # out of order, with an empty range
        ([(22, 23)], [(28, 29), (0, 1)]),
        ([], [(0, 29)]),
        ([(0, 23)], []),
    ]
    for rows, cols in cases:
        selected = mask.select(rows, cols)
        expected = dense[positions(rows)][:, positions(cols)]
        assert selected.shape == tuple(expected.shape), (rows, cols)
        assert torch.equal(selected.to_dense(), expected), (rows, cols)
        assert selected.nnz == int(expected.sum())
    assert mask.select(((2, 5),), [[1, 4]]).shape == (3, 3)  # any sequences of two ints


def test_select_errors_name_the_argument():
    mask = st.Mask.from_spec("causal", 8, 8)
    with pytest.raises(ValueError, match=r"Mask\.select: rows\[1\] = \[3, 9\) must satisfy 0 <= begin <= end <= seqlen_q = 8"):
        mask.select([(0, 1), (3, 9)], [(0, 8)])
    with pytest.raises(ValueError, match=r"Mask\.select: cols\[0\] = \[0, 4\) and cols\[1\] = \[2, 5\) overlap"):
        mask.select([(0, 8)], [(0, 4), (2, 5)])
    with pytest.raises(TypeError, match=r"Mask\.select: rows must be a sequence"):
        mask.select(5, [(0, 8)])
    with pytest.raises(TypeError, match=r"Mask\.select: cols\[0\] must be a \(begin, end\) pair"):
        mask.select([(0, 8)], [(0, 4, 6)])
    with pytest.raises(TypeError, match=r"Mask\.select: rows\[0\] = \(0, 2\.5\) must hold ints"):
        mask.select([(0, 2.5)], [(0, 8)])
    with pytest.raises(ValueError, match=r"does not fit in int64"):
        mask.select([(0, 2**70)], [(0, 8)])


def part_attention(q, k, v, mask, cols):
    """Attention of every query over the keys of the ranges `cols` (one range here)."""
    (begin, end), = cols
    part = mask.select([(0, q.shape[2])], cols)
    return st.attention(q, k[:, :, begin:end], v[:, :, begin:end], part, return_lse=True)


@pytest.mark.parametrize("spec", ["causal", "sliding_window:w=5", "random:p=0.1,seed=2"])
@pytest.mark.parametrize("algorithm", ["flash", "small_cache"])
def test_merged_key_parts_equal_attention_over_all_keys(spec, algorithm, generator):
    n, split = 97, 40
    q, k, v = (torch.randn(2, 2, n, 16, generator=generator) for _ in range(3))
    mask = st.Mask.from_spec(spec, n, n)
    run = dict(algorithm=algorithm, cache_words=2048)
    o_full, lse_full = st.attention(q, k, v, mask, return_lse=True, **run)
    o_a, lse_a = part_attention(q, k, v, mask, [(0, split)])
    o_b, lse_b = part_attention(q, k, v, mask, [(split, n)])
    inputs = [t.clone() for t in (o_a, lse_a, o_b, lse_b)]
    o, lse = st.merge_partials(o_a, lse_a, o_b, lse_b)
    torch.testing.assert_close(o, o_full, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(lse, lse_full, atol=2e-5, rtol=1e-5)  # -inf where a row attends nothing
    assert o_full.abs().max() > 0.05
    for before, after in zip(inputs, (o_a, lse_a, o_b, lse_b)):
        assert torch.equal(before, after)  # the inputs are untouched
    if spec == "causal":
        assert torch.isneginf(lse_b[:, :, :split]).all()  # early rows attend nothing in the second part
    # The torch formula (what other devices run) agrees with the op.
    o_torch, lse_torch = _merge_with_torch("test", o_a, lse_a, o_b, lse_b)
    torch.testing.assert_close(o_torch, o, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(lse_torch, lse, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("merge", [st.merge_partials, lambda *a: _merge_with_torch("test", *a)])
def test_empty_sides_are_exact(merge):
    inf = math.inf
    o = torch.tensor([[7.0, 8.0], [0.1, -0.0], [3.0, 3.0]]).reshape(1, 1, 3, 2)
    lse = torch.tensor([-inf, 1.0 / 3.0, -inf]).reshape(1, 1, 3)
    o_part = torch.tensor([[-1.0, 2.0], [9.0, 9.0], [0.3, -0.0]]).reshape(1, 1, 3, 2)
    lse_part = torch.tensor([-inf, -inf, 0.7]).reshape(1, 1, 3)
    merged, merged_lse = merge(o, lse, o_part, lse_part)
    assert not torch.isnan(merged).any() and not torch.isnan(merged_lse).any()
    assert torch.equal(merged[0, 0, 0], torch.zeros(2))  # both empty
    assert torch.isneginf(merged_lse[0, 0, 0])
    for row, source, source_lse in ((1, o, lse), (2, o_part, lse_part)):  # one side empty: the other, bitwise
        assert torch.equal(merged[0, 0, row].view(torch.int32), source[0, 0, row].view(torch.int32))
        assert torch.equal(merged_lse[0, 0, row].view(torch.int32), source_lse[0, 0, row].view(torch.int32))


def test_merge_partials_errors():
    o, lse = torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3)
    with pytest.raises(ValueError, match=r"spattn\.torch\.merge_partials: o_part has extent 5 in dimension 2, o has 3"):
        st.merge_partials(o, lse, torch.zeros(1, 2, 5, 4), lse)
    with pytest.raises(ValueError, match=r"spattn\.torch\.merge_partials: lse_part\[0, 1, 2, 0\] = nan is not finite"):
        bad = lse.clone()
        bad[0, 1, 2] = math.nan
        st.merge_partials(o, lse, o, bad)
    with pytest.raises(ValueError, match=r"spattn\.torch\.merge_partials: lse has 4 dimensions, expected 3"):
        st.merge_partials(o, o, o, lse)
    with pytest.raises(ValueError, match=r"o has dtype Double, expected Float"):
        st.merge_partials(o.double(), lse, o, lse)
    with pytest.raises(TypeError, match=r"lse_part must be a tensor"):
        st.merge_partials(o, lse, o, None)
    with pytest.raises(ValueError, match=r"not differentiable"):
        st.merge_partials(o.requires_grad_(), lse, o, lse)
