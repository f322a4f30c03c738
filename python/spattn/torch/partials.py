"""Merging attention over disjoint key parts: spattn.torch.merge_partials (context parallelism)."""

import math
from typing import Tuple

import torch

from .._ops import ops
from . import _translate

__all__ = ["merge_partials"]


def merge_partials(
    o: torch.Tensor, lse: torch.Tensor, o_part: torch.Tensor, lse_part: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Attention over two disjoint sets of keys, combined: (o, lse) and (o_part, lse_part) as
    ``attention(..., return_lse=True)`` returns them over keys that share none, o
    (batch, heads, seqlen, head_dim_v) and lse (batch, heads, seqlen). Returns new (o, lse):
    attention over the union of the keys; the inputs are left as they are.

    Per row, in float32: m = max(lse, lse_part), w = exp(lse - m), w_part = exp(lse_part - m),
    o = (w o + w_part o_part) / (w + w_part), lse = m + log(w + w_part). A side with lse = -inf
    attended no key: with both empty o is 0 and lse -inf; with one empty the result is the other
    side's o and lse, bit for bit.

    On the CPU (float32) this is spattn's ``merge_attention_partials``, which refuses mismatched
    shapes, NaN or +inf in an lse and non-finite o values with a ValueError naming the argument. On
    other devices the same formula runs as torch operations in float32 (o is returned in its own
    dtype, lse in float32), without the scan for non-finite values. It is not differentiable: the
    backward of a key part needs no merge, only the merged o and lse (docs/api.md, "Shards").
    """
    where = "spattn.torch.merge_partials"
    named = (("o", o), ("lse", lse), ("o_part", o_part), ("lse_part", lse_part))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a tensor, got {type(t).__name__}")
        if t.device != o.device:
            raise ValueError(f"{where}: {name} is on {t.device}, o on {o.device}")
    if torch.is_grad_enabled() and any(t.requires_grad for _, t in named):
        raise ValueError(f"{where}: the merge is not differentiable; call it under torch.no_grad() or on detached "
                         "tensors (a key part's backward takes the merged o and lse instead: docs/api.md)")
    if o.device.type == "cpu":
        return _translate(lambda: ops.merge_partials(o, lse, o_part, lse_part))
    return _merge_with_torch(where, o, lse, o_part, lse_part)


def _merge_with_torch(where, o, lse, o_part, lse_part) -> Tuple[torch.Tensor, torch.Tensor]:
    """merge_partials' formula as torch operations, for tensors off the CPU."""
    if o.dim() != 4 or o_part.shape != o.shape:
        raise ValueError(f"{where}: o {tuple(o.shape)} and o_part {tuple(o_part.shape)} must be one (batch, heads, seqlen, dim) shape")
    if lse.shape != o.shape[:3] or lse_part.shape != lse.shape:
        raise ValueError(f"{where}: lse {tuple(lse.shape)} and lse_part {tuple(lse_part.shape)} must be o's "
                         f"(batch, heads, seqlen) = {tuple(o.shape[:3])}")
    lse, lse_part = lse.float(), lse_part.float()
    m = torch.maximum(lse, lse_part)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # both sides empty: weights exp(-inf) = 0, not NaN
    w, w_part = torch.exp(lse - m), torch.exp(lse_part - m)
    total = w + w_part
    nonempty = total > 0
    divisor = torch.where(nonempty, total, torch.ones_like(total))
    merged = (w.unsqueeze(-1) * o.float() + w_part.unsqueeze(-1) * o_part.float()) / divisor.unsqueeze(-1)
    merged_lse = torch.where(nonempty, m + torch.log(divisor), torch.full_like(m, -math.inf))
    # Where one side is empty, take the other side exactly (the arithmetic would turn -0 into +0).
    o_empty, part_empty = torch.isneginf(lse).unsqueeze(-1), torch.isneginf(lse_part).unsqueeze(-1)
    merged = torch.where(o_empty & ~part_empty, o_part.float(), torch.where(part_empty & ~o_empty, o.float(), merged))
    return merged.to(o.dtype), merged_lse
