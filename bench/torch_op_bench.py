"""spattn.torch.attention against torch's dense masked attention on the CPU, in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_op_bench.py [--n 4096 16384] [--reps 3]

For each mask (--masks, from the full and causal masks, a sliding window of half-width 256, documents
and BigBird; by default the last three), n and dtype (--dtypes: float32, bfloat16, float16): the median
time of the forward, the backward and both, for spattn's op (auto's choice) and for torch's dense
masked attention on the same tensors (scores materialized: n x n per head), and the ratio
torch / spattn; for a 16-bit dtype also spattn float32's fwd+bwd time over this dtype's (> 1: the
16-bit call is faster). With --paired-reps N, spattn's float32 and 16-bit fwd+bwd are also timed in
turns, N pairs, and the median of the per-pair ratios float32 / 16-bit is printed with its range: a
drift in the machine's speed then falls on both (on a 2-core VM medians taken apart swing by up to
1.5x between neighbouring rows). Where the dense path's intermediates would not fit in --dense-limit-gib,
or torch has no CPU kernel for the dtype (float16 matmul in torch 1.13), it is not run and the
table says so. Then the Python wrapper's overhead: st.attention against the raw op
(torch.ops.spattn.forward) on the same inputs at n = 128 and n = 1024.
"""

import argparse
import platform
import statistics
import time

import torch

import spattn.torch as st
from spattn._ops import ops

MASKS = {
    "full": "full",
    "causal": "causal",
    "window 256": "sliding_window:w=256",
    "documents": "documents:num_docs=8",
    "bigbird": "bigbird:block=64,w=1,g=2,r=3,seed=7",
}


def median_seconds(fn, reps):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def dense_attention(q, k, v, dense_mask):
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    probs = torch.softmax(scores.masked_fill(~dense_mask, float("-inf")), dim=-1).nan_to_num(0.0)
    return probs @ v


def time_passes(forward, inputs, reps):
    """Median forward, backward and forward+backward seconds of forward(*inputs)."""
    d_out = torch.randn_like(forward(*inputs))

    def fwd():
        with torch.no_grad():
            forward(*inputs)

    def both():
        out = forward(*inputs)
        out.backward(d_out)

    def bwd_only():
        out = forward(*inputs)
        start = time.perf_counter()
        out.backward(d_out)
        return time.perf_counter() - start

    both()  # warm: the mask's plans and structures for both passes are built on first use
    backward = statistics.median(bwd_only() for _ in range(reps))
    return median_seconds(fwd, reps), backward, median_seconds(both, reps)


def paired_ratios(forward, first, second, pairs):
    """Per pair, fwd+bwd seconds of forward(*first) over forward(*second), the two taken in turns."""
    def one(inputs, d_out):
        start = time.perf_counter()
        forward(*inputs).backward(d_out)
        return time.perf_counter() - start

    d_first = torch.randn_like(forward(*first))
    d_second = torch.randn_like(forward(*second))
    return [one(first, d_first) / one(second, d_second) for _ in range(pairs)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="*", default=[4096, 16384],
                        help="sequence lengths (none: only the wrapper's overhead)")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--masks", nargs="*", choices=list(MASKS), default=[m for m in MASKS if m not in ("full", "causal")],
                        help="which masks (default: the window, documents and BigBird)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads, which spattn's op also follows (0: leave torch's default)")
    parser.add_argument("--dtypes", nargs="*", choices=["float32", "bfloat16", "float16"], default=["float32"],
                        help="element types, each timed on the same values (default: float32)")
    parser.add_argument("--paired-reps", type=int, default=0,
                        help="pairs of spattn float32 and 16-bit fwd+bwd timed in turns (0: none)")
    parser.add_argument("--dense-limit-gib", type=float, default=12.0,
                        help="skip the dense path when its n x n intermediates would take more")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    print(f"spattn.torch vs torch dense masked attention | {platform.processor() or platform.machine()} | "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads | d {args.d}, heads {args.heads}")
    print(f"{'mask':<11} {'n':>6} {'dtype':>8} | {'spattn fwd':>10} {'bwd':>9} {'both':>9} | {'torch fwd':>10} {'bwd':>9} "
          f"{'both':>9} | torch/spattn fwd bwd both (ms)")
    generator = torch.Generator().manual_seed(0)
    for name in args.masks:
        spec = MASKS[name]
        for n in args.n:
            values = [torch.randn(1, args.heads, n, args.d, generator=generator) for _ in range(3)]
            mask = st.Mask.from_spec(spec, n, n)
            float32_both = None
            float32_inputs = None
            for dtype_name in args.dtypes:
                dtype = getattr(torch, dtype_name)
                q, k, v = (x.to(dtype).requires_grad_() for x in values)
                ours = time_passes(lambda a, b, c: st.attention(a, b, c, mask), (q, k, v), args.reps)
                if dtype == torch.float32:
                    float32_both = ours[2]
                    float32_inputs = (q, k, v)
                # scores, probabilities and their gradients: about 4 n^2 elements per head
                dense_gib = 4 * q.element_size() * args.heads * n * n / 2**30
                if dtype == torch.float16:
                    theirs, why = None, "torch 1.13 has no float16 matmul on the CPU"
                elif dense_gib > args.dense_limit_gib:
                    theirs = None
                    why = f"its intermediates need about {dense_gib:.0f} GiB (limit {args.dense_limit_gib:g})"
                else:
                    dense_mask = mask.to_dense()
                    theirs = time_passes(lambda a, b, c: dense_attention(a, b, c, dense_mask), (q, k, v), args.reps)
                row = f"{name:<11} {n:>6} {dtype_name:>8} | " + " ".join(f"{1e3 * t:9.1f}" for t in ours) + " | "
                if theirs is None:
                    row += f"torch not run: {why}"
                else:
                    row += " ".join(f"{1e3 * t:9.1f}" for t in theirs) + " | " + " ".join(
                        f"{b / a:6.1f}x" for a, b in zip(ours, theirs))
                if dtype != torch.float32 and float32_both is not None:
                    row += f" | spattn float32/{dtype_name} {float32_both / ours[2]:.2f}x"
                print(row, flush=True)
                if dtype != torch.float32 and float32_inputs is not None and args.paired_reps > 0:
                    ratios = paired_ratios(lambda a, b, c: st.attention(a, b, c, mask), float32_inputs, (q, k, v),
                                           args.paired_reps)
                    print(f"{'':<11} {'':>6} {'':>8} | paired: spattn float32/{dtype_name} fwd+bwd "
                          f"{statistics.median(ratios):.3f}x (min {min(ratios):.3f}, max {max(ratios):.3f}, "
                          f"{len(ratios)} pairs)", flush=True)

    print("\nThe Python wrapper's overhead over the raw op (forward, auto, median of 200 calls):")
    for n in (128, 1024):
        q, k, v = (torch.randn(1, args.heads, n, args.d, generator=generator) for _ in range(3))
        mask = st.Mask.from_spec("sliding_window:w=64", n, n)
        raw = median_seconds(lambda: ops.forward(q, k, v, [mask._key], None, "auto", 0, 0, "time", 0), 200)
        wrapped = median_seconds(lambda: st.attention(q, k, v, mask), 200)
        print(f"  n {n:>5}: raw op {1e6 * raw:8.1f} us, st.attention {1e6 * wrapped:8.1f} us, "
              f"overhead {100 * (wrapped - raw) / raw:5.1f} %")


if __name__ == "__main__":
    main()
