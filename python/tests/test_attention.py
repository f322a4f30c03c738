"""spattn.torch.attention against torch's dense masked attention in float64, over patterns, odd
sizes, grouped-query heads and per-head masks; forward and gradients; determinism."""

import pytest
import torch

import spattn.torch as st
from conftest import dense_attention, head_masks
from spattn.testing import within_tolerance

PATTERNS = ["full", "causal", "sliding_window:w=3", "random:p=0.3,seed=5", "documents:num_docs={docs},causal=1"]  # {docs}: min(3, n)
SIZES = [1, 7, 97, 257]


def make_inputs(batch, heads, kv_heads, seqlen_q, seqlen_k, dim, generator, dtype=torch.float32):
    def tensor(h, n):
        return torch.randn(batch, h, n, dim, generator=generator, dtype=dtype).requires_grad_()

    return tensor(heads, seqlen_q), tensor(kv_heads, seqlen_k), tensor(kv_heads, seqlen_k)


def errors(q, k, v, masks, heads, run):
    """spattn's and the naive float32 computation's largest errors against float64, for the
    output and the three gradients."""
    dense_mask = head_masks(masks, heads).unsqueeze(0)
    d_out = torch.randn(q.shape[0], heads, q.shape[2], v.shape[3], generator=torch.Generator().manual_seed(7))
    results = {}
    for name, fn, dtype in (("spattn", run, torch.float32), ("naive", None, torch.float32), ("exact", None, torch.float64)):
        qq, kk, vv = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
        out = fn(qq, kk, vv) if fn else dense_attention(qq, kk, vv, dense_mask)[0]
        out.backward(d_out.to(dtype))
        results[name] = [out.detach().double(), qq.grad.double(), kk.grad.double(), vv.grad.double()]
    spattn_error = [(a - b).abs().max().item() for a, b in zip(results["spattn"], results["exact"])]
    naive_error = [(a - b).abs().max().item() for a, b in zip(results["naive"], results["exact"])]
    largest = [b.abs().max().item() for b in results["exact"]]
    return spattn_error, naive_error, largest, results["spattn"]


@pytest.mark.parametrize("algorithm", ["flash", "small_cache", "auto"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_matches_float64_within_twice_the_naive_error(pattern, algorithm, generator):
    for n in SIZES:
        q, k, v = make_inputs(1, 4, 2, n, n, 16, generator)
        mask = st.Mask.from_spec(pattern.format(docs=min(3, n)), n, n)
        run = lambda a, b, c: st.attention(a, b, c, mask, algorithm=algorithm, cache_words=2048)  # noqa: E731
        spattn_error, naive_error, largest, outputs = errors(q, k, v, mask, 4, run)
        for what, ours, naive, big in zip(("o", "dq", "dk", "dv"), spattn_error, naive_error, largest):
            assert within_tolerance(ours, naive, big), f"{pattern} n {n} {algorithm}: {what} error {ours:.3g}, naive {naive:.3g}"
        if mask.nnz > 0 and n > 1:
            assert outputs[0].abs().max() > 0 and outputs[1].abs().max() > 0, f"{pattern} n {n}: trivial outputs"


def test_rectangular_per_head_masks_and_strided_views(generator):
    seqlen_q, seqlen_k, heads = 37, 29, 3
    base = torch.randn(2, seqlen_q, heads, 8, generator=generator)
    q = base.transpose(1, 2).requires_grad_()  # (batch, heads, seqlen, dim) with non-contiguous strides
    k = torch.randn(2, 1, seqlen_k, 8, generator=generator, requires_grad=True)
    v = torch.randn(2, 1, seqlen_k, 8, generator=generator, requires_grad=True)
    masks = [st.Mask.from_spec(spec, seqlen_q, seqlen_k) for spec in ("causal", "sliding_window:w=2", "full")]
    run = lambda a, b, c: st.attention(a, b, c, masks, algorithm="auto")  # noqa: E731
    spattn_error, naive_error, largest, _ = errors(q, k, v, masks, heads, run)
    for ours, naive, big in zip(spattn_error, naive_error, largest):
        assert within_tolerance(ours, naive, big)


def test_a_fully_masked_row_gives_zero_output_minus_infinity_lse_and_no_gradient(generator):
    dense = torch.ones(6, 6, dtype=torch.bool).tril()
    dense[2] = False
    mask = st.Mask.from_dense(dense)
    q, k, v = make_inputs(1, 2, 2, 6, 6, 4, generator)
    for algorithm in ("flash", "small_cache"):
        out, lse = st.attention(q, k, v, mask, algorithm=algorithm, return_lse=True)
        assert torch.all(out[:, :, 2] == 0) and torch.all(torch.isneginf(lse[:, :, 2]))
        assert torch.isfinite(lse[:, :, [0, 1, 3, 4, 5]]).all()
        (grad_q,) = torch.autograd.grad(out.sum(), q)
        assert torch.all(grad_q[:, :, 2] == 0) and grad_q.abs().max() > 0


@pytest.mark.parametrize("algorithm", ["flash", "small_cache"])
def test_outputs_and_gradients_are_bitwise_identical_over_repeats(algorithm, generator):
    q, k, v = make_inputs(2, 4, 2, 97, 97, 16, generator)
    mask = st.Mask.from_spec("random:p=0.2,seed=3", 97, 97)
    d_out = torch.randn(2, 4, 97, 16, generator=generator)
    first = None
    for _ in range(20):
        out = st.attention(q, k, v, mask, algorithm=algorithm, threads=2)
        grads = torch.autograd.grad(out, (q, k, v), d_out)
        result = [out.detach()] + [g for g in grads]
        if first is None:
            first = result
        for a, b in zip(first, result):
            assert torch.equal(a, b)


def test_gradcheck_through_the_float64_reference():
    generator = torch.Generator().manual_seed(3)
    empty_row = torch.ones(5, 4, dtype=torch.bool).tril()
    empty_row[1] = False
    cases = [
        (st.Mask.from_dense(empty_row), 2, 2, 5, 4),  # an empty row, rectangular
        (st.Mask.from_spec("causal", 4, 4), 4, 2, 4, 4),  # grouped-query heads
        ([st.Mask.from_spec("causal", 3, 3), st.Mask.from_spec("sliding_window:w=1", 3, 3)], 2, 1, 3, 3),  # per head
    ]
    for mask, heads, kv_heads, seqlen_q, seqlen_k in cases:
        q, k, v = make_inputs(1, heads, kv_heads, seqlen_q, seqlen_k, 3, generator, dtype=torch.float64)
        fn = lambda a, b, c: st.attention(a, b, c, mask, algorithm="reference")  # noqa: E731
        assert torch.autograd.gradcheck(fn, (q, k, v))


def test_io_counts_equal_the_preview_and_the_prediction(generator):
    q, k, v = make_inputs(1, 2, 1, 64, 64, 16, generator)
    mask = st.Mask.from_spec("sliding_window:w=8", 64, 64)
    for algorithm in ("flash", "small_cache", "auto"):
        out, report = st.attention(q, k, v, mask, algorithm=algorithm, cache_words=1024, io=True)
        assert report["counted_reads"] == report["predicted_reads"] > 0
        assert report["counted_writes"] == report["predicted_writes"] > 0
        assert sum(op["reads"] for op in report["operands"].values()) == report["counted_reads"]
        preview = st.plan(q, k, v, mask, algorithm=algorithm, cache_words=1024)
        for key in ("algorithm", "predicted_reads", "predicted_writes", "flash", "small_cache", "bound"):
            assert preview[key] == report[key], key
        assert report["bound"] > 0
        # Lines: counted for every call and, over a mask, predicted for block-sparse flash and the
        # density-adaptive small_cache alike.
        assert sum(op["read_lines"] for op in report["operands"].values()) == report["counted_read_lines"] > 0
        assert report["line_words"] == 16
        assert report["predicted_read_lines"] == report["counted_read_lines"]
        assert report["predicted_write_lines"] == report["counted_write_lines"]


def test_the_line_size_is_a_parameter_of_the_plan_and_the_counts(generator):
    q, k, v = make_inputs(1, 1, 1, 97, 97, 8, generator)
    mask = st.Mask.from_spec("random:p=0.2,seed=3", 97, 97)
    for line_words in (1, 2, 8, 16, 32):
        for algorithm in ("flash", "small_cache"):
            out, report = st.attention(q, k, v, mask, algorithm=algorithm, cache_words=2048, io=True,
                                       line_words=line_words)
            assert report["line_words"] == line_words
            assert report["counted_read_lines"] == report["predicted_read_lines"] > 0
            assert report["counted_write_lines"] == report["predicted_write_lines"] > 0
            assert report["counted_reads"] == report["predicted_reads"]
            if line_words == 1:  # the word model: a line is a word
                assert report["counted_read_lines"] == report["counted_reads"]
            preview = st.plan(q, k, v, mask, algorithm=algorithm, cache_words=2048, line_words=line_words)
            for key in ("algorithm", "predicted_reads", "predicted_read_lines", "flash", "small_cache", "line_words"):
                assert preview[key] == report[key], key
    # The tiles follow it: the density-adaptive small_cache moves line-sized runs only with lines.
    words = st.plan(q, k, v, mask, algorithm="small_cache", cache_words=4096, objective="words", line_words=1)
    lines = st.plan(q, k, v, mask, algorithm="small_cache", cache_words=4096, objective="words", line_words=16)
    assert " run " not in words["small_cache"]["tiles"] and " run 16" in lines["small_cache"]["tiles"]
    for bad in (3, -1, 2048, 2.0, True):
        with pytest.raises(ValueError, match="line_words must be 0"):
            st.attention(q, k, v, mask, line_words=bad)
        with pytest.raises(ValueError, match="line_words must be 0"):
            st.plan(q, k, v, mask, line_words=bad)


def test_dense_lines_counted_equal_the_prediction(generator):
    q, k, v = make_inputs(1, 2, 2, 64, 64, 16, generator)
    mask = st.Mask.full(64, 64)
    for algorithm in ("flash", "small_cache"):
        out, report = st.attention(q, k, v, mask, algorithm=algorithm, cache_words=1024, io=True)
        assert report["counted_read_lines"] == report["predicted_read_lines"] > 0, algorithm
        assert report["counted_write_lines"] == report["predicted_write_lines"] > 0, algorithm
        assert report[algorithm]["lines"] == (report["predicted_read_lines"] + report["predicted_write_lines"]) // 2
