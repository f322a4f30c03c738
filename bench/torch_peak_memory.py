"""Peak resident memory of one spattn.torch.attention forward + backward, per dtype, each in a
fresh process, beside the bytes of the tensors the step itself holds.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_peak_memory.py --n 1048576 \\
        --mask sliding_window:w=256 --dtypes float32 bfloat16

For each dtype: a child process builds q, k, v and dO (one head, --d) in that dtype, runs the
forward and the backward once (auto's choice), and reports its peak RSS (getrusage ru_maxrss) and
the peak RSS of the same process before the tensors existed (torch and spattn loaded: the
baseline). "tensors" is what the step holds: q, k, v, o, dO, dq, dk, dv in the dtype and LSE in
float32. The last column is this dtype's peak over the first dtype's.
"""

import argparse
import json
import resource
import subprocess
import sys


def child(args):
    import torch

    import spattn.torch as st

    torch.set_num_threads(args.threads)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    dtype = getattr(torch, args.child)
    mask = st.Mask.from_spec(args.mask, args.n, args.n)
    generator = torch.Generator().manual_seed(0)
    q, k, v, d_out = (torch.randn(1, 1, args.n, args.d, generator=generator, dtype=dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    out = st.attention(q, k, v, mask)
    out.backward(d_out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tensors = 8 * args.n * args.d * q.element_size() + 4 * args.n
    print(json.dumps({"baseline": baseline, "peak": peak, "tensors": tensors}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--mask", default="sliding_window:w=256")
    parser.add_argument("--dtypes", nargs="*", choices=["float32", "bfloat16", "float16"],
                        default=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    mib = 1 << 20
    print(f"one forward + backward, {args.mask}, n {args.n}, d {args.d}, one head, {args.threads} threads")
    print(f"{'dtype':>9} | {'peak RSS':>9} {'baseline':>9} {'tensors':>9} (MiB) | peak / tensors | peak / first")
    first = None
    for dtype in args.dtypes:
        command = [sys.executable, __file__, "--n", str(args.n), "--d", str(args.d), "--mask", args.mask,
                   "--threads", str(args.threads), "--child", dtype]
        result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        first = first or result["peak"]
        print(f"{dtype:>9} | {result['peak'] / mib:9.0f} {result['baseline'] / mib:9.0f} {result['tensors'] / mib:9.0f}"
              f"       | {result['peak'] / result['tensors']:13.2f}x | {result['peak'] / first:11.2f}x", flush=True)


if __name__ == "__main__":
    main()
