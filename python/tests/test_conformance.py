"""The conformance suite passes torch's own dense masked attention and spattn's schedules, and
fails a broken implementation naming the pattern; the BlockMask conversion is exact."""

import os
import subprocess
import sys
import types

import pytest
import torch

import spattn.torch as st
from spattn.testing import conformance, default_cases, format_table


def dense_torch_attention(q, k, v, mask):
    """torch's scaled_dot_product_attention with the mask as a dense bool tensor."""
    heads = q.shape[1]
    dense = mask.to_dense().expand(heads, *mask.shape) if isinstance(mask, st.Mask) else torch.stack([m.to_dense() for m in mask])
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    probs = torch.softmax(scores.masked_fill(~dense, float("-inf")), dim=-1).nan_to_num(0.0)
    return probs @ v


def ignores_the_last_row(q, k, v, mask):
    """Broken: the mask's last query row attends every key."""
    dense = mask.to_dense().clone() if isinstance(mask, st.Mask) else None
    if dense is None:
        return dense_torch_attention(q, k, v, mask)
    dense[-1] = True
    return dense_torch_attention(q, k, v, st.Mask.from_dense(dense))


def test_torch_dense_attention_and_spattn_pass_every_case():
    for fn in (dense_torch_attention, lambda q, k, v, m: st.attention(q, k, v, m, cache_words=1024)):
        results = conformance(fn)
        assert len(results) == len(default_cases()) > 20
        assert all(r.passed for r in results), format_table(results)


def coarse_inputs(q, k, v, mask):
    """Broken for 16-bit dtypes: q, k and v cut to 3 mantissa bits (bfloat16 with its 4 low bits
    cleared) before running, where float16 holds 10 and bfloat16 7."""
    def coarsen(x):
        bits = x.detach().to(torch.bfloat16).view(torch.int16) & ~0xF
        return x + (bits.view(torch.bfloat16).to(x.dtype) - x).detach()  # differentiable, as a cast

    return st.attention(coarsen(q), coarsen(k), coarsen(v), mask)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16bit_functions_pass_and_a_coarse_one_fails_by_the_naive_16bit_rule(dtype):
    results = conformance(lambda q, k, v, m: st.attention(q, k, v, m, cache_words=1024), dtype=dtype)
    assert all(r.passed for r in results), format_table(results)
    failed = [r.case.name for r in conformance(coarse_inputs, dtype=dtype) if not r.passed]
    assert "full n=97" in failed and "causal n=97" in failed, failed
    with pytest.raises(ValueError, match="dtype must be torch.float32, float16 or bfloat16"):
        conformance(coarse_inputs, dtype=torch.float64)


def test_a_broken_implementation_fails_naming_the_pattern():
    results = conformance(ignores_the_last_row)
    failed = [r.case.name for r in results if not r.passed]
    assert "sliding_window n=97" in failed and "documents n=97" in failed
    # A full or causal mask's last row attends every key anyway: nothing to catch there.
    assert "full n=97" not in failed and "causal n=97" not in failed
    table = format_table(results)
    assert "FAIL: o error" in table


def test_the_command_line_prints_the_table_and_exits_non_zero_on_a_failure():
    here = os.path.dirname(os.path.abspath(__file__))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + sys.path))
    command = [sys.executable, "-m", "spattn.conformance"]

    def run(target):
        return subprocess.run(command + [target], capture_output=True, text=True, env=environment)

    good = run("test_conformance:dense_torch_attention")
    assert good.returncode == 0, good.stdout + good.stderr
    assert " passed, 0 failed" in good.stdout
    bad = run("test_conformance:ignores_the_last_row")
    assert bad.returncode == 1 and "FAIL" in bad.stdout
    missing = run("test_conformance:no_such_function")
    assert missing.returncode == 2 and "no_such_function" in missing.stderr


def block_mask_like(mask_mod, heads, seqlen_q, seqlen_k, q_block, kv_block, with_full_blocks):
    """A BlockMask-shaped object (FlexAttention's attribute names and meaning) built by evaluating
    mask_mod block by block, as create_block_mask does."""
    q_blocks, kv_blocks = -(-seqlen_q // q_block), -(-seqlen_k // kv_block)
    kv_num = torch.zeros(1, heads, q_blocks, dtype=torch.int32)
    kv_idx = torch.zeros(1, heads, q_blocks, kv_blocks, dtype=torch.int32)
    full_num, full_idx = torch.zeros_like(kv_num), torch.zeros_like(kv_idx)
    for h in range(heads):
        for qb in range(q_blocks):
            for kb in range(kv_blocks):
                q_idx = torch.arange(qb * q_block, min((qb + 1) * q_block, seqlen_q)).unsqueeze(1)
                k_idx = torch.arange(kb * kv_block, min((kb + 1) * kv_block, seqlen_k)).unsqueeze(0)
                block = mask_mod(torch.tensor(0), torch.tensor(h), q_idx, k_idx).expand(len(q_idx), k_idx.shape[1])
                if not block.any():
                    continue
                if with_full_blocks and block.all():
                    full_idx[0, h, qb, full_num[0, h, qb]] = kb
                    full_num[0, h, qb] += 1
                else:
                    kv_idx[0, h, qb, kv_num[0, h, qb]] = kb
                    kv_num[0, h, qb] += 1
    return types.SimpleNamespace(
        kv_num_blocks=kv_num, kv_indices=kv_idx,
        full_kv_num_blocks=full_num if with_full_blocks else None, full_kv_indices=full_idx if with_full_blocks else None,
        BLOCK_SIZE=(q_block, kv_block), mask_mod=mask_mod, seq_lengths=(seqlen_q, seqlen_k))


@pytest.mark.parametrize("with_full_blocks", [True, False])
def test_block_mask_conversion_is_exact(with_full_blocks):
    def window_per_head(b, h, q_idx, kv_idx):  # head h: causal window of 3 + 2 h keys
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= 3 + 2 * h)

    seqlen_q, seqlen_k, heads = 37, 37, 2
    converted = st.Mask.from_block_mask(block_mask_like(window_per_head, heads, seqlen_q, seqlen_k, 8, 4, with_full_blocks))
    assert len(converted) == heads
    q_idx, k_idx = torch.arange(seqlen_q).unsqueeze(1), torch.arange(seqlen_k).unsqueeze(0)
    for h, mask in enumerate(converted):
        expected = window_per_head(torch.tensor(0), torch.tensor(h), q_idx, k_idx)
        assert torch.equal(mask.to_dense(), expected), f"head {h}"
        assert mask.nnz == int(expected.sum()) > 0
        assert mask.form == "blocks"
        _, _, partial, bits, block_size = mask.blocks()
        assert block_size == (8, 4) and int(partial.sum()) == bits.shape[0] > 0  # the band's blocks are partial
