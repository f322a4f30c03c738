"""Masks in their compact forms: the form each constructor takes, the bytes it holds, packed documents
from cu_seqlens and from document ids against the same masks built densely, and bad input."""

import pickle

import pytest
import torch

import spattn.torch as st


def dense_documents(ids_q, ids_k, causal):
    mask = ids_q.unsqueeze(1) == ids_k.unsqueeze(0)
    if causal:
        n_q, n_k = ids_q.numel(), ids_k.numel()
        mask &= torch.arange(n_k).unsqueeze(0) <= torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    return mask


def test_specs_take_their_compact_form():
    assert st.Mask.from_spec("causal", 64, 64).form == "intervals"
    assert st.Mask.from_spec("random:p=0.2,seed=1", 64, 64).form == "elements"
    assert st.Mask.from_spec("full", 64, 64).form == "full"
    assert st.Mask.from_spec("bigbird:block=8,seed=1", 64, 64).form == "blocks"
    causal = st.Mask.from_spec("causal", 64, 64)
    assert causal.memory_bytes() == 8 * (65 + 2 * 64)
    row_ptr, begin, end = causal.intervals()
    assert row_ptr.tolist() == list(range(65))
    assert begin.tolist() == [0] * 64 and end.tolist() == list(range(1, 65))
    assert "form=intervals" in repr(causal)


def test_a_million_token_causal_mask_holds_its_rows():
    n = 1 << 20
    mask = st.Mask.from_spec("causal", n, n)
    assert mask.nnz == n * (n + 1) // 2
    assert mask.memory_bytes() <= 32 * n


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [[5], [3, 0, 4, 1], [1, 1, 1], [10, 20, 7]])
def test_cu_seqlens_equal_the_documents_spec(lengths, causal):
    cu = torch.tensor([0] + lengths).cumsum(0)
    mask = st.Mask.from_cu_seqlens(cu, causal=causal)
    n = sum(lengths)
    spec = "documents:lengths=" + "/".join(str(x) for x in lengths) + f",causal={int(causal)}"
    assert torch.equal(mask.to_dense(), st.Mask.from_spec(spec, n, n).to_dense())
    assert mask.nnz > 0 and mask.form in ("intervals", "full")


def test_rectangular_cu_seqlens_are_bottom_right_aligned_per_document():
    cu_q, cu_k = torch.tensor([0, 2, 5]), torch.tensor([0, 4, 6])
    mask = st.Mask.from_cu_seqlens(cu_q, cu_k, causal=True)
    expected = st.Mask.from_spec("documents:lengths=2/3,lengths_k=4/2,causal=1", 5, 6)
    assert torch.equal(mask.to_dense(), expected.to_dense())


@pytest.mark.parametrize("causal", [False, True])
def test_document_ids_equal_the_dense_mask(causal):
    generator = torch.Generator().manual_seed(3)
    for ids_q, ids_k in [
        (torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2]), None),
        (torch.tensor([4, 4, 1, 1, 4, 7, 1]), None),                      # documents that are not contiguous
        (torch.tensor([0, 1, 1]), torch.tensor([0, 0, 1, 1, 1, 2])),      # rectangular; id 2 has no query
        (torch.randint(0, 5, (97,), generator=generator), None),
        (torch.tensor([], dtype=torch.int64), None),
    ]:
        ids_k_full = ids_q if ids_k is None else ids_k
        mask = st.Mask.from_document_ids(ids_q, ids_k, causal=causal)
        assert mask.shape == (ids_q.numel(), ids_k_full.numel())
        assert torch.equal(mask.to_dense(), dense_documents(ids_q, ids_k_full, causal))


def test_attention_over_document_ids_equals_attention_over_the_dense_mask():
    generator = torch.Generator().manual_seed(5)
    ids = torch.repeat_interleave(torch.arange(4), torch.tensor([30, 1, 50, 16]))
    compact = st.Mask.from_document_ids(ids, causal=True)
    pairs = st.Mask.from_dense(compact.to_dense())
    assert compact.form == "intervals" and pairs.form == "elements"
    q, k, v = (torch.randn(1, 2, 97, 16, generator=generator, requires_grad=True) for _ in range(3))
    results = []
    for mask in (compact, pairs):
        qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
        out = st.attention(qq, kk, vv, mask)
        out.sum().backward()
        results.append([out.detach(), qq.grad, kk.grad, vv.grad])
    for a, b in zip(*results):
        assert torch.equal(a, b)
        assert a.abs().max() > 0


def test_pickling_keeps_the_form():
    mask = st.Mask.from_spec("sliding_window:w=3", 20, 20)
    again = pickle.loads(pickle.dumps(mask))
    assert again.form == "intervals" and torch.equal(again.to_dense(), mask.to_dense())
    full = pickle.loads(pickle.dumps(st.Mask.full(3, 4)))
    assert full.form == "full" and full.shape == (3, 4)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match=r"cu_seqlens_q must start at 0"):
        st.Mask.from_cu_seqlens(torch.tensor([1, 3]))
    with pytest.raises(ValueError, match=r"cu_seqlens_q must not decrease: cu_seqlens_q\[2\] = 2 < cu_seqlens_q\[1\] = 4"):
        st.Mask.from_cu_seqlens(torch.tensor([0, 4, 2]))
    with pytest.raises(ValueError, match=r"cu_seqlens_q has 2 documents but cu_seqlens_k has 1"):
        st.Mask.from_cu_seqlens(torch.tensor([0, 2, 4]), torch.tensor([0, 4]))
    with pytest.raises(TypeError, match=r"ids_q must be a 1-D integer tensor"):
        st.Mask.from_document_ids(torch.zeros(4))
    with pytest.raises(TypeError, match=r"causal must be a bool"):
        st.Mask.from_cu_seqlens(torch.tensor([0, 2]), causal=1)
    with pytest.raises(ValueError, match=r"Mask.from_intervals: row 0, interval 1 = \[3, 6\) starts before"):
        st.Mask.from_intervals(torch.tensor([0, 2]), torch.tensor([0, 3]), torch.tensor([4, 6]), (1, 8))
    with pytest.raises(ValueError, match=r"row_ptr has 2 entries, expected seqlen_q \+ 1 = 3"):
        st.Mask.from_intervals(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1]), (2, 8))
    with pytest.raises(ValueError, match=r"random: the pairs .* more than the limit of \d+ bytes \(physical memory\)"):
        st.Mask.from_spec("random:p=0.5", 10**9, 10**9)  # refused from the spec, before allocating
