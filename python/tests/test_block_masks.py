"""Block masks (Mask.from_block_indices, Mask.from_blocks): equal to the same masks built densely at
odd sizes, the same outputs and gradients as the pairs, clear errors on bad input, and a model
whose block selection changes every step."""

import pickle

import pytest
import torch

import spattn.torch as st


def dense_selection(indices, counts, block_q, block_k, seqlen_q, seqlen_k):
    dense = torch.zeros(seqlen_q, seqlen_k, dtype=torch.bool)
    for i in range(indices.shape[0]):
        for j in indices[i, : int(counts[i])].tolist():
            dense[i * block_q:(i + 1) * block_q, j * block_k:(j + 1) * block_k] = True
    return dense


def random_selection(generator, seqlen_q, seqlen_k, block_q, block_k, width):
    q_blocks, k_blocks = -(-seqlen_q // block_q), -(-seqlen_k // block_k)
    width = min(width, k_blocks)
    indices = torch.stack([torch.randperm(k_blocks, generator=generator)[:width] for _ in range(q_blocks)])
    counts = torch.randint(0, width + 1, (q_blocks,), generator=generator)
    return indices, counts


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (7, 7), (97, 97), (257, 257), (97, 33), (33, 257)])
@pytest.mark.parametrize("block_q,block_k", [(16, 16), (5, 3), (64, 32)])
def test_block_indices_equal_the_dense_selection(seqlen_q, seqlen_k, block_q, block_k):
    generator = torch.Generator().manual_seed(seqlen_q * 1000 + seqlen_k + block_q)
    indices, counts = random_selection(generator, seqlen_q, seqlen_k, block_q, block_k, 4)
    mask = st.Mask.from_block_indices(indices, counts, block_q, block_k, seqlen_q, seqlen_k)
    expected = dense_selection(indices, counts, block_q, block_k, seqlen_q, seqlen_k)
    if 0 < int(expected.sum()) < seqlen_q * seqlen_k:
        assert mask.form == "blocks"
        assert mask.memory_bytes() == 4 * (indices.shape[0] + 1) + 13 * int(counts.sum())  # before to_dense's CSR
    assert torch.equal(mask.to_dense(), expected)
    assert mask.nnz == int(expected.sum())


def test_block_indices_per_head_and_pickling():
    generator = torch.Generator().manual_seed(3)
    heads, n = 3, 97
    per_head = [random_selection(generator, n, n, 16, 16, 3) for _ in range(heads)]
    indices = torch.stack([i for i, _ in per_head])
    counts = torch.stack([c for _, c in per_head])
    masks = st.Mask.from_block_indices(indices, counts, 16, 16, n, n)
    assert len(masks) == heads
    for mask, (i, c) in zip(masks, per_head):
        assert torch.equal(mask.to_dense(), dense_selection(i, c, 16, 16, n, n))
        again = pickle.loads(pickle.dumps(mask))
        assert again.form == mask.form and torch.equal(again.to_dense(), mask.to_dense())


def test_partial_blocks_round_trip_through_from_blocks():
    # 10 x 9 at blocks of 4 x 4: block (0, 0) partial (a lower triangle), block (0, 2) full (clipped
    # to one key), block (2, 1) partial (its in-range rows 8-9).
    tri = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    edge = torch.zeros(4, 4, dtype=torch.bool)
    edge[1, 2] = True
    mask = st.Mask.from_blocks(torch.tensor([0, 2, 2, 3]), torch.tensor([0, 2, 1]), torch.tensor([True, False, True]),
                               torch.stack([tri, edge]), (4, 4), (10, 9))
    expected = torch.zeros(10, 9, dtype=torch.bool)
    expected[0:4, 0:4] = tri
    expected[0:4, 8] = True
    expected[9, 6] = True
    assert mask.form == "blocks" and torch.equal(mask.to_dense(), expected)
    again = pickle.loads(pickle.dumps(mask))
    assert torch.equal(again.to_dense(), expected)


def test_attention_over_a_block_mask_equals_attention_over_its_pairs():
    generator = torch.Generator().manual_seed(11)
    n = 257
    indices, counts = random_selection(generator, n, n, 32, 32, 3)
    blocks = st.Mask.from_block_indices(indices, counts, 32, 32, n, n)
    pairs = st.Mask.from_dense(blocks.to_dense())
    q, k, v = (torch.randn(1, 2, n, 16, generator=generator) for _ in range(3))
    results = []
    for mask in (blocks, pairs):
        qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
        out = st.attention(qq, kk, vv, mask)
        out.square().sum().backward()
        results.append([out.detach(), qq.grad, kk.grad, vv.grad])
    for a, b in zip(*results):
        assert torch.equal(a, b)
        assert a.abs().max() > 0


def test_bad_block_indices_are_clear_errors():
    indices = torch.tensor([[0, 1], [2, 0]])
    counts = torch.tensor([2, 1])
    with pytest.raises(ValueError, match=r"indices\[1, 0\] = 2 is outside the key blocks \[0, 2\)"):
        st.Mask.from_block_indices(indices, counts, 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"counts\[0\] = 3 is outside \[0, 2\]"):
        st.Mask.from_block_indices(indices, torch.tensor([3, 1]), 4, 4, 8, 12)
    with pytest.raises(ValueError, match=r"indices\[0\] lists key block 1 twice"):
        st.Mask.from_block_indices(torch.tensor([[1, 1], [0, 0]]), counts, 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"indices has shape \[3, 2\], expected \(2, width\)"):
        st.Mask.from_block_indices(torch.zeros(3, 2, dtype=torch.int64), torch.zeros(3, dtype=torch.int64), 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"expected \(query blocks, width\) and \(query blocks,\)"):
        st.Mask.from_block_indices(indices, torch.tensor([1]), 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"block size \(0, 4\) must be positive"):
        st.Mask.from_block_indices(indices, counts, 0, 4, 8, 8)
    with pytest.raises(ValueError, match=r"indices has dtype Float"):
        st.Mask.from_block_indices(indices.float(), counts, 4, 4, 8, 8)
    with pytest.raises(ValueError, match=r"counts\[1\] = -1 is outside"):
        st.Mask.from_block_indices(indices, torch.tensor([1, -1]), 4, 4, 8, 12)


def test_bad_blocks_are_clear_errors():
    with pytest.raises(ValueError, match=r"Mask.from_blocks: partial block 0 .* sets no element"):
        st.Mask.from_blocks(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([True]), torch.zeros(1, 4, 4, dtype=torch.bool),
                            (4, 4), (4, 4))
    with pytest.raises(ValueError, match=r"bits has shape \[0, 4, 4\], expected \(1, 4, 4\)"):
        st.Mask.from_blocks(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([True]), torch.zeros(0, 4, 4, dtype=torch.bool),
                            (4, 4), (4, 4))
    with pytest.raises(ValueError, match=r"Mask.from_blocks: block_col_idx"):
        st.Mask.from_blocks(torch.tensor([0, 2]), torch.tensor([1, 0]), torch.tensor([False, False]),
                            torch.zeros(0, 4, 4, dtype=torch.bool), (4, 4), (4, 8))


class BlockSelectingAttention(torch.nn.Module):
    """One attention layer whose key blocks are chosen every step from the pooled queries and keys
    (top-k block scores, as MoBA does): the mask depends on the weights, so it changes as they train."""

    def __init__(self, dim, heads, block, top_k):
        super().__init__()
        self.heads, self.block, self.top_k = heads, block, top_k
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def selection(self, q, k):
        n = q.shape[2]
        blocks = -(-n // self.block)
        pad = blocks * self.block - n
        pooled_q = torch.nn.functional.pad(q, (0, 0, 0, pad)).reshape(*q.shape[:2], blocks, self.block, -1).mean(3)
        pooled_k = torch.nn.functional.pad(k, (0, 0, 0, pad)).reshape(*k.shape[:2], blocks, self.block, -1).mean(3)
        scores = (pooled_q @ pooled_k.transpose(-1, -2))[0]  # (heads, blocks, blocks)
        indices = scores.topk(min(self.top_k, blocks), dim=-1).indices
        counts = torch.full(indices.shape[:2], indices.shape[2], dtype=torch.int64)
        return indices, counts

    def forward(self, x):
        batch, n, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, n, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        indices, counts = self.selection(q.detach(), k.detach())
        masks = st.Mask.from_block_indices(indices, counts, self.block, self.block, n, n)
        self.last_masks = masks
        out = st.attention(q, k, v, masks)
        return self.out(out.transpose(1, 2).reshape(batch, n, dim))


def dense_attention(q, k, v, masks):
    dense = torch.stack([m.to_dense() for m in masks])
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    return torch.softmax(scores.masked_fill(~dense, float("-inf")), dim=-1).nan_to_num(0.0) @ v


def test_a_model_whose_block_selection_changes_every_step_trains():
    torch.manual_seed(0)
    n, dim, heads = 97, 32, 2
    model = BlockSelectingAttention(dim, heads, block=16, top_k=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(1, n, dim)
    target = torch.roll(x, shifts=1, dims=1)
    losses, selections = [], []
    for _ in range(12):
        optimizer.zero_grad()
        loss = (model(x) - target).square().mean()
        loss.backward()
        # The step's gradients equal dense masked attention's over the same masks.
        q, k, v = model.qkv(x).reshape(1, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
        dense_out = dense_attention(q, k, v, model.last_masks)
        reference = (model.out(dense_out.transpose(1, 2).reshape(1, n, dim)) - target).square().mean()
        grads = torch.autograd.grad(reference, list(model.parameters()))
        for p, g in zip(model.parameters(), grads):
            assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6)
        selections.append(torch.stack([m.to_dense() for m in model.last_masks]))
        losses.append(float(loss))
        optimizer.step()
    assert losses[-1] < 0.9 * losses[0]
    assert any(not torch.equal(a, b) for a, b in zip(selections, selections[1:])), "the selection never changed"
