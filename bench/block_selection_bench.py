"""The cost of a block selection rebuilt every step, against the attention it feeds, in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/block_selection_bench.py [--n 32768] [--heads 16]
        [--block 64] [--top-k 16] [--d 64] [--steps 2] [--threads 2] [--algorithm auto]

Each step draws new top-k key blocks per query block and head (from random block scores, as a
model's pooled scores would give them), then times Mask.from_block_indices for every head, and
the forward and backward of spattn.torch.attention over those new masks (the first call on a mask
plans it and builds its structures: that is part of every step here), then the same call again on
the same masks (planned: what the attention itself takes). Prints each step's times, the build's
share of the fwd+bwd, the masks' bytes and the attended pairs.
"""

import argparse
import platform
import time

import torch

import spattn.torch as st


def fwd_bwd(q, k, v, masks, args):
    for t in (q, k, v):
        t.grad = None
    start = time.perf_counter()
    out = st.attention(q, k, v, masks, algorithm=args.algorithm, threads=args.threads)
    forward = time.perf_counter() - start
    start = time.perf_counter()
    out.sum().backward()
    return forward, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--top-k", type=int, default=16)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--algorithm", default="auto")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    blocks = -(-args.n // args.block)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, args.heads, args.n, args.d, generator=generator).requires_grad_() for _ in range(3))
    print(f"block selection: n {args.n}, {args.heads} heads, block {args.block}, top-{args.top_k} of {blocks} key blocks, "
          f"d {args.d}, {args.threads} threads, algorithm {args.algorithm}; {platform.processor() or platform.machine()}")
    for step in range(args.steps):
        scores = torch.rand(args.heads, blocks, blocks, generator=generator)
        indices = scores.topk(args.top_k, dim=-1).indices
        counts = torch.full((args.heads, blocks), args.top_k, dtype=torch.int64)
        start = time.perf_counter()
        masks = st.Mask.from_block_indices(indices, counts, args.block, args.block, args.n, args.n)
        build = time.perf_counter() - start
        forward, backward = fwd_bwd(q, k, v, masks, args)
        planned_forward, planned_backward = fwd_bwd(q, k, v, masks, args)
        mask_bytes = sum(m.memory_bytes() for m in masks)
        pairs = sum(m.nnz for m in masks)
        print(f"step {step}: build {build * 1e3:.1f} ms, forward {forward:.2f} s, backward {backward:.2f} s; "
              f"build / (fwd + bwd) = {100 * build / (forward + backward):.2f}%; masks {mask_bytes / 2**20:.2f} MiB "
              f"(after the run, with their row intervals), {pairs} attended pairs; the same masks again: forward "
              f"{planned_forward:.2f} s, backward {planned_backward:.2f} s")


if __name__ == "__main__":
    main()
