"""A small transformer language model trained on the CPU with spattn's attention.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_long_context/train.py [--steps 300]

The task needs links longer than the attention window: a sequence opens with G random "memory"
symbols, and at every later position t the model must output the memory symbol of slot t mod G.
The attention mask is Longformer's causal sliding window plus global tokens
(global_window:w=W,g=G,causal=1): for t beyond G + W the memory is out of the window and
reachable only through the global keys. Each position is told its slot (an embedding of t mod G),
so one attention layer can learn to look the memory up.

The same model (same initial weights, same batches) first runs --compare-steps steps with torch's
dense masked attention and with spattn's, printing both losses and times per step (they agree to
float32 rounding); then it trains with spattn's attention for --steps steps.

With --bf16 every step runs under torch.autocast("cpu", dtype=torch.bfloat16): the projections
produce bfloat16 q, k, v and spattn's attention runs in bfloat16 (the dense comparison too), the
weights and the optimizer staying float32. The two losses then agree to bfloat16's rounding.
"""

import contextlib

import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import spattn.torch as st


class Attention(nn.Module):
    def __init__(self, width, heads, head_dim, backend, mask):
        super().__init__()
        self.heads, self.head_dim, self.backend, self.mask = heads, head_dim, backend, mask
        self.qkv = nn.Linear(width, 3 * heads * head_dim, bias=False)
        self.out = nn.Linear(heads * head_dim, width, bias=False)

    def forward(self, x):
        batch, seqlen, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seqlen, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.backend == "spattn":
            y = st.attention(q, k, v, self.mask["spattn"])  # any strides: q, k, v are views
        else:
            scores = (q @ k.transpose(-1, -2)) * self.head_dim**-0.5
            y = torch.softmax(scores.masked_fill(~self.mask["dense"], float("-inf")), dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(batch, seqlen, self.heads * self.head_dim))


class Block(nn.Module):
    def __init__(self, width, heads, head_dim, backend, mask):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = Attention(width, heads, head_dim, backend, mask)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, vocab, slots, width, layers, heads, head_dim, backend, mask):
        super().__init__()
        self.slots = slots
        self.symbol = nn.Embedding(vocab, width)
        self.slot = nn.Embedding(slots, width)
        self.memory = nn.Embedding(2, width)  # memory position or not
        self.blocks = nn.ModuleList(Block(width, heads, head_dim, backend, mask) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def set_backend(self, backend):
        for block in self.blocks:
            block.attention.backend = backend

    def forward(self, tokens):
        seqlen = tokens.shape[1]
        position = torch.arange(seqlen)
        x = self.symbol(tokens) + self.slot(position % self.slots) + self.memory((position < self.slots).long())
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def batch_of(generator, batch, seqlen, vocab, slots):
    tokens = torch.randint(vocab, (batch, seqlen), generator=generator)
    targets = tokens[:, torch.arange(seqlen) % slots]  # the memory symbol of each position's slot
    return tokens, targets


def loss_and_accuracy(model, tokens, targets, slots, bf16):
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
        logits = model(tokens)[:, slots:].float()
    labels = targets[:, slots:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    return loss, (logits.argmax(-1) == labels).float().mean().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlen", type=int, default=4096)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--slots", type=int, default=8, help="memory symbols = global tokens")
    parser.add_argument("--vocab", type=int, default=16)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--compare-steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bf16", action="store_true", help="run every step under bfloat16 autocast")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    spec = f"global_window:w={args.window},g={args.slots},causal=1"
    mask = {"spattn": st.Mask.from_spec(spec, args.seqlen, args.seqlen)}
    mask["dense"] = mask["spattn"].to_dense() if args.compare_steps > 0 else None
    model = Model(args.vocab, args.slots, args.width, args.layers, args.heads, args.head_dim, "spattn", mask)
    print(f"mask {spec}, seqlen {args.seqlen}: {mask['spattn'].nnz} attended pairs "
          f"(density {mask['spattn'].nnz / args.seqlen**2:.4f}); {sum(p.numel() for p in model.parameters())} "
          f"parameters; torch {torch.__version__}, {torch.get_num_threads()} threads"
          f"{'; bfloat16 autocast' if args.bf16 else ''}")

    # The same steps with both attentions, from the same weights and batches.
    if args.compare_steps > 0:
        runs = {}
        for backend in ("dense", "spattn"):
            twin = copy.deepcopy(model)
            twin.set_backend(backend)
            optimizer = torch.optim.Adam(twin.parameters(), lr=args.lr)
            generator = torch.Generator().manual_seed(args.seed + 1)
            losses, seconds = [], []
            for _ in range(args.compare_steps):
                tokens, targets = batch_of(generator, args.batch, args.seqlen, args.vocab, args.slots)
                start = time.perf_counter()
                loss, _ = loss_and_accuracy(twin, tokens, targets, args.slots, args.bf16)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                seconds.append(time.perf_counter() - start)
                losses.append(loss.item())
            runs[backend] = (losses, seconds)
        for step in range(args.compare_steps):
            dense_loss, spattn_loss = runs["dense"][0][step], runs["spattn"][0][step]
            print(f"compare step {step}: loss dense {dense_loss:.6f}, spattn {spattn_loss:.6f} "
                  f"(difference {abs(dense_loss - spattn_loss):.2e}); seconds per step dense "
                  f"{runs['dense'][1][step]:.3f}, spattn {runs['spattn'][1][step]:.3f}")
        worst = max(abs(a - b) for a, b in zip(*(runs[b][0] for b in ("dense", "spattn"))))
        # float32: rounding of the sums; bfloat16: a few of its ulps (2^-8 relative) of the loss.
        limit = 4 * 2**-8 * max(runs["dense"][0]) if args.bf16 else 1e-3
        if worst > limit:
            raise SystemExit(f"the two attentions' losses differ by {worst:.3g} (limit {limit:.3g})")

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed + 1)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        tokens, targets = batch_of(generator, args.batch, args.seqlen, args.vocab, args.slots)
        loss, accuracy = loss_and_accuracy(model, tokens, targets, args.slots, args.bf16)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 25 == 0 or step == 1:
            print(f"step {step:4d}: loss {loss.item():.4f}, accuracy {accuracy:.3f} "
                  f"({(time.perf_counter() - start) / step:.3f} s per step)", flush=True)
    # Positions far beyond the window can only read their memory through the global keys.
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext():
        tokens, targets = batch_of(generator, 1, args.seqlen, args.vocab, args.slots)
        far = model(tokens)[:, args.slots + 4 * args.window:].argmax(-1) == targets[:, args.slots + 4 * args.window:]
    print(f"held-out accuracy beyond 4 windows from the memory: {far.float().mean().item():.3f} "
          f"(chance {1 / args.vocab:.3f})")


if __name__ == "__main__":
    main()
