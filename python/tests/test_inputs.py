"""Masks built every way agree, and bad input is a clear Python exception naming the argument,
raised before anything runs."""

import subprocess
import sys

import pytest
import torch

import spattn.torch as st


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
def test_masks_from_spec_dense_csr_and_sparse_tensors_agree():
    spec = st.Mask.from_spec("sliding_window:w=2", 9, 7)
    dense = spec.to_dense()
    assert dense.shape == (9, 7) and spec.nnz == int(dense.sum()) > 0
    from_dense = st.Mask.from_dense(dense)
    from_csr = st.Mask.from_csr(spec.crow_indices(), spec.col_indices(), (9, 7))
    from_sparse = st.Mask.from_sparse(dense.to_sparse_csr())
    for mask in (from_dense, from_csr, from_sparse):
        assert torch.equal(mask.to_dense(), dense)


@pytest.mark.filterwarnings("ignore:Sparse BSR tensor support is in beta state")
def test_a_bsr_tensor_attends_whole_blocks():
    crow = torch.tensor([0, 1, 2])
    col = torch.tensor([0, 1])
    blocks = torch.zeros(2, 2, 3)  # stored blocks attend whole, whatever their values
    bsr = torch.sparse_bsr_tensor(crow, col, blocks, (4, 6))
    expected = torch.zeros(4, 6, dtype=torch.bool)
    expected[0:2, 0:3] = True
    expected[2:4, 3:6] = True
    assert torch.equal(st.Mask.from_sparse(bsr).to_dense(), expected)


def test_copies_share_a_mask_and_pickling_rebuilds_it():
    import copy
    import pickle

    mask = st.Mask.from_spec("global_window:w=2,g=1,causal=1", 7, 7)
    assert copy.deepcopy({"m": mask})["m"] is mask and copy.copy(mask) is mask
    loaded = pickle.loads(pickle.dumps(mask))
    assert loaded is not mask and torch.equal(loaded.to_dense(), mask.to_dense())


def test_a_mask_is_reused_across_calls_and_shapes_of_batch():
    mask = st.Mask.from_spec("causal", 8, 8)
    for batch in (1, 3):
        q = torch.randn(batch, 2, 8, 4)
        assert st.attention(q, q, q, mask).shape == (batch, 2, 8, 4)


def bad_call(**changes):
    args = dict(q=torch.randn(1, 4, 8, 4), k=torch.randn(1, 2, 8, 4), v=torch.randn(1, 2, 8, 4),
                mask=st.Mask.from_spec("causal", 8, 8))
    args.update(changes)
    q, k, v, mask = args.pop("q"), args.pop("k"), args.pop("v"), args.pop("mask")
    return lambda: st.attention(q, k, v, mask, **args)


@pytest.mark.parametrize(
    "changes, error, words",
    [
        (dict(q=torch.randn(4, 8, 4)), ValueError, "q has 3 dimensions"),
        (dict(q=torch.randn(1, 4, 8, 4).to(torch.complex64)), TypeError, "q has dtype torch.complex64"),
        (dict(q=torch.randn(1, 4, 8, 4).half()), TypeError, "k has dtype torch.float32, q has torch.float16"),
        (dict(k=torch.randn(1, 2, 8, 4).double()), TypeError, "k has dtype torch.float64"),
        (dict(k=torch.randn(1, 3, 8, 4), v=torch.randn(1, 3, 8, 4)), ValueError, "not a multiple of k's 3 heads"),
        (dict(k=torch.randn(1, 2, 8, 5)), ValueError, "k has head_dim 5"),
        (dict(mask=st.Mask.from_spec("causal", 8, 9)), ValueError, "mask is 8 x 9"),
        (dict(mask=[st.Mask.full(8, 8)] * 3), ValueError, "mask has 3 masks, q has 4 heads"),
        (dict(mask="causal"), TypeError, "mask must be a spattn.torch.Mask, a list"),
        (dict(mask=["causal"] * 4), TypeError, "mask[0] must be a spattn.torch.Mask"),
        (dict(algorithm="fast"), ValueError, "algorithm must be one of"),
        (dict(objective="speed"), ValueError, "objective must be one of"),
        (dict(cache_words=-1), ValueError, "cache_words must be a non-negative int"),
        (dict(scale=float("nan")), ValueError, "scale must be a finite number"),
        (dict(threads=-1), ValueError, "threads = -1 must be an int in [0, 4096]"),
        (dict(threads=4097), ValueError, "threads = 4097 must be an int in [0, 4096]"),
        (dict(threads=2.0), ValueError, "threads = 2.0 must be an int"),
        (dict(q=torch.randn(1, 4, 8, 4).double(), k=torch.randn(1, 2, 8, 4).double(),
              v=torch.randn(1, 2, 8, 4).double()), TypeError, "float64 runs only with algorithm='reference'"),
        (dict(cache_words=3, algorithm="flash"), ValueError, "flash forward needs M >="),
        (dict(q=torch.randn(1, 4, 8, 4, device="meta")), ValueError, "k is on cpu, q on meta"),
        (dict(q=torch.randn(1, 4, 8, 4, device="meta"), k=torch.randn(1, 2, 8, 4, device="meta"),
              v=torch.randn(1, 2, 8, 4, device="meta")), ValueError, "spattn runs on the CPU and on CUDA"),
        (dict(q=torch.randn(1, 4, 8, 4).double(), k=torch.randn(1, 2, 8, 4).double(),
              v=torch.randn(1, 2, 8, 4).double(), algorithm="reference", io=True), ValueError,
         "io=True counts spattn's schedules"),
    ],
)
def test_bad_input_names_the_argument(changes, error, words):
    with pytest.raises(error) as raised:
        bad_call(**changes)()
    assert words in str(raised.value)


def test_bad_masks_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="crow_indices has 3 entries"):
        st.Mask.from_csr(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), (3, 3))
    with pytest.raises(ValueError, match="col_indices has dtype"):
        st.Mask.from_csr(torch.tensor([0, 1]), torch.tensor([0.5]), (1, 3))
    with pytest.raises(ValueError):
        st.Mask.from_csr(torch.tensor([0, 2]), torch.tensor([1, 0]), (1, 3))  # columns not increasing
    with pytest.raises(ValueError, match="spec"):
        st.Mask.from_spec("no_such_pattern", 4, 4)
    with pytest.raises(TypeError, match="2-D bool tensor"):
        st.Mask.from_dense(torch.ones(3, 3))
    with pytest.raises(ValueError, match="seqlen_q must be a non-negative int"):
        st.Mask.from_spec("causal", -1, 4)


def test_the_ops_take_masks_by_key_and_refuse_a_key_of_no_live_mask():
    from spattn._ops import ops

    q = torch.randn(1, 1, 4, 4)
    mask = st.Mask.from_spec("causal", 4, 4)
    out, lse = ops.forward(q, q, q, [mask._key], None, "auto", 0, 0, "time", 1)
    assert torch.equal(out, st.attention(q, q, q, mask, threads=1))
    stale = st.Mask.from_spec("causal", 4, 4)._key  # the Mask is dropped at once
    with pytest.raises(ValueError, match=f"mask key {stale} names no live spattn Mask"):
        ops.forward(q, q, q, [stale], None, "auto", 0, 0, "time", 1)
    assert st.Mask.from_spec("causal", 4, 4)._key != stale  # keys are never reused


def test_threads_zero_and_none_are_torchs_thread_count():
    q, k, v = torch.randn(1, 4, 8, 4), torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)
    mask = st.Mask.from_spec("causal", 8, 8)
    by_none = st.attention(q, k, v, mask, threads=None)
    assert by_none.abs().sum() > 0
    assert torch.equal(st.attention(q, k, v, mask, threads=0), by_none)
    assert torch.equal(st.attention(q, k, v, mask, threads=4096), by_none)


def test_distributed_is_reachable_after_importing_spattn_torch():
    code = ("import sys, spattn.torch as st\n"
            "assert 'spattn.torch.distributed' not in sys.modules\n"
            "assert callable(st.distributed.attention)\n"
            "import spattn.torch.distributed as d\n"
            "assert d is st.distributed\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="has no attribute 'distributd'"):
        st.distributd
