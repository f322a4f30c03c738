"""Shared helpers of the spattn.torch tests: torch's dense masked attention in float64 (the
reference) and in float32 done naively (what the tolerance is measured against)."""

import pytest
import torch

import spattn.torch as st


def dense_attention(q, k, v, mask, scale=None):
    """Dense masked attention; a fully masked row gives 0 and LSE -inf. GQA by repeating k, v."""
    heads, kv_heads = q.shape[1], k.shape[1]
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1).masked_fill(torch.isinf(lse).unsqueeze(-1), 0.0))
    return probs @ v, lse


def head_masks(masks, heads):
    """The (heads, seqlen_q, seqlen_k) bool tensor of one mask or one per head."""
    if isinstance(masks, st.Mask):
        return masks.to_dense().expand(heads, *masks.shape)
    return torch.stack([m.to_dense() for m in masks])


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)
