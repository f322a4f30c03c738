"""Mask state and plan time against n, beside the same masks as int64 CSR and as FlexAttention
BlockMasks, in one run.

    python3 bench/mask_state_bench.py [--spattn build/spattn] [--log2n 13 20] [--masks causal ...]

For each mask and n = 2^lo .. 2^hi: the form spattn holds the mask in and its bytes (what
`spattn plan` prints, Mask::memory_bytes()), the same mask as int64 CSR (8 bytes a row and a
pair), a FlexAttention BlockMask at block 128 (its documented layout: int32 kv_num_blocks and
full_kv_num_blocks of n / 128 entries and kv_indices and full_kv_indices of (n / 128)^2, whatever
the mask), and the wall time and peak RSS of `spattn plan --n N --d 64 --mask MASK --pass both`
(M = 4096, objective words), as a markdown table.
"""

import argparse
import os
import re
import subprocess
import time

MASKS = ["causal", "sliding_window:w=256", "documents:num_docs=8", "documents:num_docs=64", "prefix_lm:p=4096",
         "bigbird"]


def human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{int(nbytes)} B"
        nbytes /= 1024


def plan(spattn: str, n: int, mask: str):
    start = time.perf_counter()
    child = subprocess.Popen([spattn, "plan", "--n", str(n), "--d", "64", "--mask", mask, "--pass", "both"],
                             stdout=subprocess.PIPE, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak RSS (KiB)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"spattn plan failed for {mask} at n {n} (exit {child.returncode})")
    found = re.search(r"mask \S+: (\w+), (\d+) bytes .*as int64 CSR (\d+) bytes", out)
    if not found:
        raise SystemExit(f"spattn plan printed no mask line for {mask} at n {n}")
    return found.group(1), int(found.group(2)), int(found.group(3)), seconds, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spattn", default="build/spattn")
    parser.add_argument("--log2n", type=int, nargs=2, default=[13, 20])
    parser.add_argument("--masks", nargs="*", default=MASKS)
    args = parser.parse_args()
    print("| mask | n | form | spattn bytes | per query row | int64 CSR | BlockMask (128) | plan fwd + bwd | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mask in args.masks:
        for log2n in range(args.log2n[0], args.log2n[1] + 1):
            n = 1 << log2n
            form, nbytes, csr, seconds, peak = plan(args.spattn, n, mask)
            blocks = -(-n // 128)
            block_mask = 2 * 4 * (blocks + blocks * blocks)
            print(f"| {mask} | 2^{log2n} | {form} | {human(nbytes)} | {nbytes / n:.1f} | {human(csr)} | {human(block_mask)} | "
                  f"{seconds:.2f} s | {human(peak * 1024)} |", flush=True)


if __name__ == "__main__":
    main()
