"""FlexAttention BlockMask -> spattn masks in block form, exactly.

A BlockMask lists, per (batch, head, query block), the key blocks a query block visits: its full
blocks (``full_kv_num_blocks`` / ``full_kv_indices``: every pair attends) and its partial blocks
(``kv_num_blocks`` / ``kv_indices``: the pairs where ``mask_mod(b, h, q_idx, kv_idx)`` is true).
When a BlockMask has no full-block lists, every listed block is partial. Pairs past
``seq_lengths`` do not exist. The conversion reads only these attributes (any object that has
them converts: the tests build BlockMask-shaped objects where FlexAttention is absent). The mask is
built in spattn's block form at the BlockMask's block size: its full blocks are listed as they are,
and ``mask_mod`` is evaluated only on its partial blocks (one block at a time), which keep their
pairs as bits; a listed block where mask_mod holds everywhere is stored full, one where it holds
nowhere is dropped.
"""

from typing import List

import torch

from .torch import Mask


def masks_from_block_mask(block_mask, batch: int = 0) -> List[Mask]:
    """One Mask per head of ``block_mask`` (its batch entry ``batch``), seq_lengths in shape."""
    q_block, kv_block = _block_size(block_mask)
    seqlen_q, seqlen_k = (int(x) for x in block_mask.seq_lengths)
    kv_num_blocks = block_mask.kv_num_blocks
    if kv_num_blocks.dim() != 3:
        raise ValueError(f"from_block_mask: kv_num_blocks has shape {tuple(kv_num_blocks.shape)}, expected (batch, heads, q_blocks)")
    if not 0 <= batch < kv_num_blocks.shape[0]:
        raise ValueError(f"from_block_mask: batch {batch} is outside the BlockMask's {kv_num_blocks.shape[0]} batch entries")
    heads, q_blocks = kv_num_blocks.shape[1], kv_num_blocks.shape[2]
    if q_blocks * q_block < seqlen_q:
        raise ValueError(f"from_block_mask: {q_blocks} query blocks of {q_block} do not cover seqlen_q {seqlen_q}")
    full = getattr(block_mask, "full_kv_num_blocks", None) is not None
    return [_head_mask(block_mask, batch, h, q_block, kv_block, seqlen_q, seqlen_k, full) for h in range(heads)]


def _block_size(block_mask):
    size = block_mask.BLOCK_SIZE
    q_block, kv_block = (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))
    if q_block < 1 or kv_block < 1:
        raise ValueError(f"from_block_mask: BLOCK_SIZE {size} must be positive")
    return q_block, kv_block


def _listed(num_blocks, indices, b, h, row):
    count = int(num_blocks[b, h, row])
    return [int(x) for x in indices[b, h, row, :count]]


def _head_mask(block_mask, b, h, q_block, kv_block, seqlen_q, seqlen_k, has_full) -> Mask:
    mask_mod = block_mask.mask_mod
    key_blocks = (seqlen_k + kv_block - 1) // kv_block
    row_ptr = [0]
    cols, partial, bits = [], [], []
    for row in range((seqlen_q + q_block - 1) // q_block):
        q0, q1 = row * q_block, min((row + 1) * q_block, seqlen_q)
        q_idx = torch.arange(q0, q1).unsqueeze(1)
        listed = {}  # key block -> None (full) or its (q_block, kv_block) pairs
        if has_full:
            for kv in _listed(block_mask.full_kv_num_blocks, block_mask.full_kv_indices, b, h, row):
                if kv < key_blocks:
                    listed[kv] = None
        for kv in _listed(block_mask.kv_num_blocks, block_mask.kv_indices, b, h, row):
            if kv >= key_blocks or kv in listed:
                continue
            k0, k1 = kv * kv_block, min((kv + 1) * kv_block, seqlen_k)
            kv_idx = torch.arange(k0, k1).unsqueeze(0)
            keep = torch.as_tensor(mask_mod(torch.tensor(b), torch.tensor(h), q_idx, kv_idx), dtype=torch.bool)
            keep = keep.expand(q1 - q0, k1 - k0)
            if bool(keep.all()):
                listed[kv] = None
            elif bool(keep.any()):
                block = torch.zeros(q_block, kv_block, dtype=torch.bool)
                block[: q1 - q0, : k1 - k0] = keep
                listed[kv] = block
        for kv in sorted(listed):
            cols.append(kv)
            partial.append(listed[kv] is not None)
            if listed[kv] is not None:
                bits.append(listed[kv])
        row_ptr.append(len(cols))
    stacked = torch.stack(bits) if bits else torch.zeros(0, q_block, kv_block, dtype=torch.bool)
    return Mask.from_blocks(torch.tensor(row_ptr, dtype=torch.int64), torch.tensor(cols, dtype=torch.int64),
                            torch.tensor(partial, dtype=torch.bool), stacked, (q_block, kv_block), (seqlen_q, seqlen_k))
