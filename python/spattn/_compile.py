"""torch >= 2.4: fake kernels and autograd for spattn's ops (torch.library.register_fake and
register_autograd), so that torch.compile traces spattn.torch.attention with no graph break
(``fullgraph=True``). With an older torch nothing is registered here, and attention's autograd is
a torch.autograd.Function (spattn/torch/__init__.py), which torch.compile cannot trace whole.

The fake kernels describe the outputs as the real kernels allocate them: contiguous, o of q's dtype
with v's head_dim, LSE float32 (float64 for the fp64 reference), gradients of the inputs' shapes.
"""

import torch

from ._ops import ops

AVAILABLE = hasattr(torch.library, "register_fake") and hasattr(torch.library, "register_autograd")
UNAVAILABLE_REASON = (
    "spattn's torch.compile support needs torch >= 2.4 (torch.library.register_fake and register_autograd); "
    f"this torch is {torch.__version__}"
)


def is_compiling() -> bool:
    return AVAILABLE and torch.compiler.is_compiling()


def _register():
    @torch.library.register_fake("spattn::forward")
    def _forward_fake(q, k, v, masks, scale, algorithm, cache_words, line_words, objective, threads):
        batch, heads, seqlen_q = q.shape[:3]
        lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        return q.new_empty((batch, heads, seqlen_q, v.shape[3])), q.new_empty((batch, heads, seqlen_q), dtype=lse_dtype)

    @torch.library.register_fake("spattn::backward")
    def _backward_fake(q, k, v, o, lse, d_o, masks, scale, algorithm, cache_words, line_words, objective, threads):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def setup_context(ctx, inputs, output):
        q, k, v, *settings = inputs
        out, lse = output
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.settings = settings  # masks (keys), scale, algorithm, cache_words, line_words, objective, threads
        ctx.mark_non_differentiable(lse)

    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ops.backward(q, k, v, out, lse, d_out.to(q.dtype), *ctx.settings)
        return (dq, dk, dv) + (None,) * len(ctx.settings)

    torch.library.register_autograd("spattn::forward", backward, setup_context=setup_context)


if AVAILABLE:
    _register()
