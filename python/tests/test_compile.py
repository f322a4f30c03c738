"""torch.compile(fullgraph=True) traces spattn.torch.attention with no graph break (fake kernels and
registered autograd, torch >= 2.4), and the compiled output and gradients equal the eager ones.
Skipped, with the reason, on an older torch."""

import pytest
import torch

import spattn.torch as st
from spattn import _compile

pytestmark = pytest.mark.skipif(not _compile.AVAILABLE, reason=_compile.UNAVAILABLE_REASON)


def test_the_ops_pass_torch_library_opcheck():
    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 33, 16, generator=generator, requires_grad=True) for _ in range(3))
    mask = st.Mask.from_spec("sliding_window:w=4", 33, 33)
    torch.library.opcheck(torch.ops.spattn.forward.default, (q, k, v, [mask._key], None, "auto", 0, "time", 1))


@pytest.mark.parametrize("algorithm", ["flash", "small_cache", "auto"])
def test_compiled_attention_equals_eager_with_no_graph_break(algorithm):
    generator = torch.Generator().manual_seed(6)
    mask = st.Mask.from_spec("bigbird:block=8,w=1,g=1,r=1,seed=2", 97, 97)

    def layer(q, k, v):
        return st.attention(q, k, v, mask, algorithm=algorithm, threads=1).sum(dim=-1)

    compiled = torch.compile(layer, fullgraph=True)
    inputs = [torch.randn(2, 4, 97, 32, generator=generator) for _ in range(3)]
    results = []
    for fn in (layer, compiled):
        q, k, v = (t.clone().requires_grad_() for t in inputs)
        out = fn(q, k, v)
        out.backward(torch.ones_like(out))
        results.append([out.detach(), q.grad, k.grad, v.grad])
    for eager, traced in zip(*results):
        assert torch.equal(eager, traced)
    assert results[0][0].abs().max() > 0 and results[0][1].abs().max() > 0
