"""The ledger against valgrind's cache simulator: for each case, cache_probe runs one native call
under callgrind with a fully associative LRU D1 of 2M words and 64-byte lines (16 fp32 words),
one thread, only the call instrumented, and the simulated D1 read misses x 16 words are held
against the words the plan predicts the call reads (equal to what a counted run reads).

    cache_sim_check.py --probe build/tests/cache_sim/cache_probe [--check | --table]

Why 2M: the model's fast memory is an optimal (offline) cache of M words; LRU with twice the
capacity misses at most twice what the optimal schedule of M words does (Sleator and Tarjan), and
a schedule that keeps its tiles hot needs the headroom for the lines its rows share.

--check (the test): dense and block-sparse (causal) flash at M = d^2 / 4 and d^2, forward and
backward, n = 512, d = 64; every ratio must lie in [0.8, 1.25]. --table: flash and small_cache over
four masks and M from d^2 / 8 to 4 d^2, printed (docs/io_model.md, "Against a cache simulator"),
where the rows outside the band are what the ledger does not model yet: small_cache's tiles of one
column touch a whole line per word, and a call's own bookkeeping (its planning, the mask's tile
lists, scratch) adds a few thousand lines that count against the small I/O of large M.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

LINE_BYTES = 64
WORD_BYTES = 4
WORDS_PER_LINE = LINE_BYTES // WORD_BYTES
BAND = (0.8, 1.25)


def simulate(args, n, d, m, algorithm, pass_, mask):
    """(plan read words, simulated D1 read misses, simulated D1 write misses, the plan's algorithm)."""
    lines = -(-2 * m * WORD_BYTES // LINE_BYTES)  # 2M words, in whole lines
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        command = [args.valgrind, "--tool=callgrind", "--cache-sim=yes", f"--D1={lines * LINE_BYTES},{lines},{LINE_BYTES}",
                   f"--LL={1 << 25},16,{LINE_BYTES}", f"--I1=32768,8,{LINE_BYTES}", "--instr-atstart=no",
                   f"--callgrind-out-file={out}", args.probe, str(n), str(d), str(m), algorithm, pass_, mask]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise SystemExit(f"cache_sim_check: {' '.join(command)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
        plan = dict(line.split(" ", 1) for line in run.stdout.strip().splitlines())
        events, totals = None, None
        with open(out) as f:
            for line in f:
                if line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith(("totals:", "summary:")):
                    totals = [int(x) for x in line.split()[1:]]
        if events is None or totals is None:
            raise SystemExit(f"cache_sim_check: no events or totals in {out}")
        counts = dict(zip(events, totals + [0] * (len(events) - len(totals))))
        return int(plan["reads"]), counts["D1mr"], counts["D1mw"], plan["algorithm"]


def row(args, n, d, m, algorithm, pass_, mask):
    reads, read_misses, write_misses, ran = simulate(args, n, d, m, algorithm, pass_, mask)
    ratio = read_misses * WORDS_PER_LINE / reads if reads else float("nan")
    return {"mask": mask, "pass": pass_, "M": m, "algorithm": ran, "reads": reads, "read_misses": read_misses,
            "write_misses": write_misses, "ratio": ratio}


def print_rows(rows):
    print(f"{'algorithm':<12} {'mask':<22} {'pass':<4} {'M':>6} {'plan reads':>12} {'D1 read misses x 16':>20} {'ratio':>6}")
    for r in rows:
        print(f"{r['algorithm']:<12} {r['mask']:<22} {r['pass']:<4} {r['M']:>6} {r['reads']:>12,} "
              f"{r['read_misses'] * WORDS_PER_LINE:>20,} {r['ratio']:>6.2f}")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--valgrind", default="valgrind")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--d", type=int, default=64)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--table", action="store_true")
    args = parser.parse_args()
    n, d = args.n, args.d
    if args.check:
        rows = [row(args, n, d, m, "flash", pass_, mask)
                for mask in ("full", "causal")
                for pass_ in ("fwd", "bwd")
                for m in (d * d // 4, d * d)]
        print_rows(rows)
        outside = [r for r in rows if not BAND[0] <= r["ratio"] <= BAND[1]]
        if outside:
            print(f"cache_sim_check: {len(outside)} rows outside [{BAND[0]}, {BAND[1]}]")
            sys.exit(1)
        print(f"cache_sim_check: all {len(rows)} flash rows within [{BAND[0]}, {BAND[1]}]")
        return
    rows = [row(args, n, d, m, algorithm, pass_, mask)
            for algorithm in ("flash", "small_cache")
            for mask in ("full", "causal", "sliding_window:w=64", "random:p=0.05")
            for pass_ in ("fwd", "bwd")
            for m in (d * d // 8, d * d // 4, d * d, 4 * d * d)]
    print_rows(rows)


if __name__ == "__main__":
    main()
