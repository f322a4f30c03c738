"""spattn.torch.attention in float16 and bfloat16 on the CPU: outputs and gradients in the input's
dtype, within twice the error of the naive computation in that dtype (every op's result rounded
to it) against float64; counted == predicted in lines of 32 16-bit words; torch.autocast; one
dtype per call."""

import pytest
import torch

import spattn.torch as st
from conftest import dense_attention, head_masks
from spattn.testing import naive_attention

DTYPES = [torch.float16, torch.bfloat16]
PATTERNS = ["full", "causal", "sliding_window:w=3", "random:p=0.3,seed=5", "documents:num_docs={docs},causal=1"]


def errors(dtype, q, k, v, mask, heads, run):
    """spattn's and the naive computation's largest errors against float64 (on the same rounded
    inputs), for the output and the three gradients, and spattn's results."""
    dense_mask = head_masks(mask, heads).unsqueeze(0)
    d_out = torch.randn(q.shape[0], heads, q.shape[2], v.shape[3], generator=torch.Generator().manual_seed(7))
    d_out = d_out.to(dtype)
    results = {}
    for name in ("spattn", "naive", "exact"):
        wide = torch.float64 if name == "exact" else torch.float32
        typed = dtype if name == "spattn" else wide
        qq, kk, vv = (x.detach().to(typed).requires_grad_() for x in (q, k, v))
        if name == "spattn":
            out = run(qq, kk, vv)
            assert out.dtype == dtype
        elif name == "naive":
            out = naive_attention(qq, kk, vv, dense_mask, rounded_to=dtype)
        else:
            out = dense_attention(qq, kk, vv, dense_mask)[0]
        out.backward(d_out.to(typed))
        if name == "spattn":
            assert qq.grad.dtype == kk.grad.dtype == vv.grad.dtype == dtype
        grads = [x.grad.to(dtype) if name == "naive" else x.grad for x in (qq, kk, vv)]  # 16-bit leaves' grads
        results[name] = [out.detach().double()] + [g.double() for g in grads]
    ours = [(a - b).abs().max().item() for a, b in zip(results["spattn"], results["exact"])]
    naive = [(a - b).abs().max().item() for a, b in zip(results["naive"], results["exact"])]
    largest = [b.abs().max().item() for b in results["exact"]]
    return ours, naive, largest, results["spattn"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", ["flash", "small_cache", "auto"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_matches_float64_within_twice_the_naive_16bit_error(pattern, algorithm, dtype, generator):
    for n in (1, 7, 97, 257):
        q, k, v = (torch.randn(1, h, n, 40, generator=generator).to(dtype) for h in (4, 2, 2))
        mask = st.Mask.from_spec(pattern.format(docs=min(3, n)), n, n)
        run = lambda a, b, c: st.attention(a, b, c, mask, algorithm=algorithm, cache_words=2048)  # noqa: E731
        ours, naive, largest, outputs = errors(dtype, q, k, v, mask, 4, run)
        floor = 8 * torch.finfo(torch.float32).eps
        for what, error, naive_error, big in zip(("o", "dq", "dk", "dv"), ours, naive, largest):
            assert error <= 2 * naive_error + floor * max(1.0, big), \
                f"{pattern} n {n} {algorithm} {dtype}: {what} error {error:.3g}, naive {naive_error:.3g}"
        if mask.nnz > 0 and n > 1:
            assert outputs[0].abs().max() > 0 and outputs[1].abs().max() > 0, f"{pattern} n {n}: trivial outputs"


@pytest.mark.parametrize("dtype", DTYPES)
def test_counts_equal_the_prediction_in_lines_of_32_words(dtype, generator):
    q, k, v = (torch.randn(1, 2, 97, 64, generator=generator).to(dtype) for _ in range(3))
    mask = st.Mask.from_spec("causal", 97, 97)
    out, report = st.attention(q, k, v, mask, algorithm="flash", cache_words=4096, io=True)
    assert out.dtype == dtype
    assert report["line_words"] == 32
    assert report["counted_reads"] == report["predicted_reads"] > 0
    assert report["counted_read_lines"] == report["predicted_read_lines"] > 0
    preview = st.plan(q, k, v, mask, algorithm="flash", cache_words=4096)
    assert preview["line_words"] == 32 and preview["predicted_reads"] == report["predicted_reads"]
    assert st.plan(q.float(), k.float(), v.float(), mask, algorithm="flash", cache_words=4096)["line_words"] == 16


def test_autocast_runs_the_op_in_bfloat16(generator):
    q, k, v = (torch.randn(1, 2, 33, 16, generator=generator, requires_grad=True) for _ in range(3))
    mask = st.Mask.from_spec("causal", 33, 33)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = st.attention(q, k, v, mask)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert q.grad.dtype == torch.float32 and q.grad.abs().max() > 0  # through the cast, as torch's ops
    # The same as calling it on bfloat16 tensors.
    direct = st.attention(q.detach().bfloat16(), k.detach().bfloat16(), v.detach().bfloat16(), mask)
    assert torch.equal(out.detach(), direct)


def test_one_dtype_per_call():
    q = torch.randn(1, 2, 8, 4).bfloat16()
    with pytest.raises(TypeError, match="k has dtype torch.float16, q has torch.bfloat16"):
        st.attention(q, q.half(), q, None)
