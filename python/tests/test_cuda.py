"""spattn.torch.attention on CUDA tensors (float32, float16, bfloat16) against float64, output and
gradients within twice the error of the same computation done naively in the input dtype on the
device. Skipped, with the reason, where torch has no CUDA device (Debian's torch is CPU-only)."""

import pytest
import torch

import spattn.torch as st
from conftest import dense_attention, head_masks
from spattn.testing import within_tolerance

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason=f"no CUDA device for torch {torch.__version__} (torch.cuda.is_available() is False)",
)

PATTERNS = ["full", "causal", "sliding_window:w=3", "random:p=0.3,seed=5", "documents:num_docs={docs},causal=1"]


def errors_on_device(q, k, v, masks, dtype, algorithm):
    heads = q.shape[1]
    dense_mask = head_masks(masks, heads).unsqueeze(0)
    d_out = torch.randn(q.shape[0], heads, q.shape[2], v.shape[3], generator=torch.Generator().manual_seed(7))
    results = {}
    for name, device, run_dtype in (("spattn", "cuda", dtype), ("naive", "cuda", dtype), ("exact", "cpu", torch.float64)):
        qq, kk, vv = (x.detach().to(device, run_dtype).requires_grad_() for x in (q, k, v))
        if name == "spattn":
            out = st.attention(qq, kk, vv, masks, algorithm=algorithm)
        else:
            out = dense_attention(qq, kk, vv, dense_mask.to(device))[0]
        out.backward(d_out.to(device, run_dtype))
        results[name] = [t.detach().cpu().double() for t in (out, qq.grad, kk.grad, vv.grad)]
    ours = [(a - b).abs().max().item() for a, b in zip(results["spattn"], results["exact"])]
    naive = [(a - b).abs().max().item() for a, b in zip(results["naive"], results["exact"])]
    largest = [b.abs().max().item() for b in results["exact"]]
    return ours, naive, largest


@pytest.mark.parametrize("algorithm", ["flash", "small_cache"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_cuda_matches_float64_within_twice_the_naive_error(pattern, dtype, algorithm):
    generator = torch.Generator().manual_seed(3)
    for n in (1, 7, 97, 257):
        q, k, v = (torch.randn(1, h, n, 64, generator=generator) for h in (4, 2, 2))
        mask = st.Mask.from_spec(pattern.format(docs=min(3, n)), n, n)
        ours, naive, largest = errors_on_device(q, k, v, mask, dtype, algorithm)
        for what, a, b, big in zip(("o", "dq", "dk", "dv"), ours, naive, largest):
            assert within_tolerance(a, b, big), f"{pattern} n {n} {dtype} {algorithm}: {what} error {a:.3g}, naive {b:.3g}"


def test_cuda_refuses_what_it_does_not_run():
    q = torch.randn(1, 2, 8, 16, device="cuda")
    mask = st.Mask.from_spec("causal", 8, 8)
    with pytest.raises(ValueError, match="io=True counts the CPU schedules"):
        st.attention(q, q, q, mask, io=True)
    with pytest.raises(ValueError, match="cache_words = 64"):
        st.attention(q, q, q, mask, cache_words=64)
    with pytest.raises(ValueError, match="k is on cpu"):
        st.attention(q, q.cpu(), q, mask)
    with pytest.raises(TypeError, match="on CUDA spattn runs float32, float16 and bfloat16"):
        st.attention(q.double(), q.double(), q.double(), mask)
