"""The ledger against valgrind's cache simulator: for each case, cache_probe runs one native call
under callgrind with a fully associative LRU D1 of 2M words and 64-byte lines (16 fp32 words),
one thread, only the call instrumented, and the simulated D1 read misses are held against the
lines of 16 words a counted run of the same call reads (io.hpp's line model).

    cache_sim_check.py --probe build/tests/cache_sim/cache_probe [--check | --table | --claims]

Why 2M: the model's fast memory is an optimal (offline) cache of M words; LRU with twice the
capacity misses at most twice what the optimal schedule of M words does (Sleator and Tarjan), and
a schedule that keeps its tiles hot needs the headroom for the lines its rows share.

--check (the test runs it with --dims 16,32,64): n = 512, d = 64, forward and backward; flash on
the full mask and block-sparse flash on the causal mask, a sliding window (64) and a uniform random mask (5 %), at M = d^2 / 8,
d^2 / 4, d^2, 4 d^2 and n d; small_cache on the four masks (dense on the full one, the
density-adaptive schedule on the others) at M = d^2 / 4, d^2, 4 d^2 and n d, the density-adaptive
one at d^2 / 8 too; dense small_cache at M = 2 L^2 (d^2 / 8); and at 2 d (128) dense small_cache at
M = 2 L^2, 4 L^2 and 8 L^2 (d^2 / 32, d^2 / 16 and d^2 / 8 there) and flash at each pass's smallest
M (4 d + 3 forward, 6 d + 3 backward: 515 and 771 words); and at d = 64 flash's backward planned for
time (the probe's last argument) on the full, causal and window masks at M = d^2 and 4 d^2, where it
runs as one loop, dQ read back and written at every visit (0.88 to 1.02 when added). Every ratio of simulated read misses to
read lines must lie in [0.8, 1.25], the read lines being those the ledger counted plus the lines of
the API's finite-value check, which reads every input once before the schedule runs and which the
ledger does not book. At d = 64 and 128 every schedule agrees from M = 2 L^2 = 512 words on (and flash
from its smallest M where that is above it): dense small_cache's tiles in M / 2 chunk at least half
a line and carry the line two chunks share. Below 2 L^2 the native call's own state (stack, the
kernels' constants, views) beside the tiles outgrows the LRU's headroom: at d = 64 dense
small_cache missed 2x to 5x its lines at M = 256 and 128, flash 3.5x (forward, M = 259) and 2.4x
(backward, M = 387) at its smallest M. Left out (--table starts at d^2 / 8, so it does not show
them either). At d = 16 and 32 (a head row of one or two lines) the same cases from 32 L^2 = 8192
words to n d: at M = 512 to 4096, 23 of 128 rows fell outside the band, 0.7x to 25x: the vector
kernels' state beside tiles a line wide, and the dK/dV pass's 1-row query tiles, whose LSE and D
words are counted a line each while a real cache keeps the line for the next row
(docs/io_model.md).

--table: flash and small_cache over four masks and M from d^2 / 8 to n d, printed
(docs/io_model.md, "Against a cache simulator"). Simulations run in parallel, one callgrind per
core (--jobs).

--claims: the paper's dense claims on the simulated cache, in lines moved (read and write misses):
small_cache against flash at M = d^2 / 16, d^2 / 4 and 16 d^2 for d = 64 and 128, and the M at
which flash starts to miss fewer lines for d = 64, 128 and 256.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

LINE_BYTES = 64
WORD_BYTES = 4
WORDS_PER_LINE = LINE_BYTES // WORD_BYTES
BAND = (0.8, 1.25)
LINES_AGREE_FROM_WORDS = 2 * WORDS_PER_LINE ** 2  # 2 L^2: below it the call's own state outgrows the LRU's headroom


def agrees_from_words(d):
    """The smallest M from which the counted lines agree with the simulator at head_dim d (src/plan/
    plan_report.cpp, report_line_domain, marks plans below it): 2 L^2 for rows of at least 4 lines,
    32 L^2 for rows of 1 to 3 lines (below it, at d = 16 and 32, 0.7x to 25x)."""
    return LINES_AGREE_FROM_WORDS if d >= 4 * WORDS_PER_LINE else 32 * WORDS_PER_LINE ** 2
MASKS = ("full", "causal", "sliding_window:w=64", "random:p=0.05")  # --check and --table


def flash_smallest_words(d, pass_):
    """Flash's smallest M for head_dim = head_dim_v = d (docs/io_model.md: 2 d + 2 d_v + 3 forward,
    3 d + 3 d_v + 3 backward); the probe names the minimum and fails if this is below it."""
    return 4 * d + 3 if pass_ == "fwd" else 6 * d + 3


def simulate(args, n, d, m, algorithm, pass_, mask, objective="words", may_not_fit=False):
    """The counted run's words and lines (the probe's output) and the simulated D1 misses; None when
    may_not_fit and the algorithm cannot run at M (the probe's message says what it needs)."""
    lines = -(-2 * m * WORD_BYTES // LINE_BYTES)  # 2M words, in whole lines
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        command = [args.valgrind, "--tool=callgrind", "--cache-sim=yes", f"--D1={lines * LINE_BYTES},{lines},{LINE_BYTES}",
                   f"--LL={1 << 25},16,{LINE_BYTES}", f"--I1=32768,8,{LINE_BYTES}", "--instr-atstart=no",
                   f"--callgrind-out-file={out}", args.probe, str(n), str(d), str(m), algorithm, pass_, mask, objective]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if run.returncode != 0 and may_not_fit and "needs M >=" in run.stderr:
            return None
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
        if int(plan["line_words"]) != WORDS_PER_LINE:
            raise SystemExit(f"cache_sim_check: the probe counts lines of {plan['line_words']} words, not {WORDS_PER_LINE}")
        return {"algorithm": plan["algorithm"], "reads": int(plan["reads"]), "writes": int(plan["writes"]),
                "read_lines": int(plan["read_lines"]), "write_lines": int(plan["write_lines"]),
                "check_lines": int(plan["check_lines"]),
                "read_misses": counts["D1mr"], "write_misses": counts["D1mw"]}


def row(args, n, d, m, algorithm, pass_, mask, objective="words"):
    r = simulate(args, n, d, m, algorithm, pass_, mask, objective)
    r.update({"mask": mask, "pass": pass_, "M": m, "d": d})
    # The call reads what the ledger counts (the schedule) and, before it, every input once (the
    # API's finite-value check, which the ledger does not book).
    read = r["read_lines"] + r["check_lines"]
    r["ratio"] = r["read_misses"] / read if read else float("nan")
    r["word_ratio"] = r["read_misses"] * WORDS_PER_LINE / r["reads"] if r["reads"] else float("nan")
    return r


def rows_of(args, cases):
    """row() of each (n, d, m, algorithm, pass, mask) case, args.jobs at a time, in case order
    (simulated misses do not depend on the load)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(lambda case: row(args, *case), cases))


def print_rows(rows):
    print(f"{'algorithm':<12} {'mask':<22} {'pass':<4} {'d':>4} {'M':>6} {'read words':>12} {'read lines':>11} "
          f"{'check lines':>11} {'D1 read misses':>15} {'misses/lines':>12} {'misses x 16/words':>17}")
    for r in rows:
        print(f"{r['algorithm']:<12} {r['mask']:<22} {r['pass']:<4} {r['d']:>4} {r['M']:>6} {r['reads']:>12,} {r['read_lines']:>11,} "
              f"{r['check_lines']:>11,} {r['read_misses']:>15,} {r['ratio']:>12.2f} {r['word_ratio']:>17.2f}")
    sys.stdout.flush()


def all_misses(args, cases):
    """Read and write D1 misses of each (n, d, m, algorithm) dense backward case, args.jobs at a
    time, in case order; None where the algorithm cannot run at M."""
    def misses(case):
        r = simulate(args, *case, "bwd", "full", "words", may_not_fit=True)
        return None if r is None else r["read_misses"] + r["write_misses"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(misses, cases))


def claims(args):
    """small_cache against flash (dense, backward) on the simulated cache, in lines moved."""
    n = args.n
    algorithms = ("small_cache", "flash")
    print(f"{'d':>4} {'M':>7} {'M/d^2':>7} {'small_cache misses':>19} {'flash misses':>13} {'fewer':>12}")
    points = [(d, m) for d in (64, 128) for m in (d * d // 16, d * d // 4, 16 * d * d)]
    counts = all_misses(args, [(n, d, m, a) for d, m in points for a in algorithms])
    for i, (d, m) in enumerate(points):
        small, flash = counts[2 * i], counts[2 * i + 1]
        if flash is None:
            print(f"{d:>4} {m:>7} {m / (d * d):>7.4g} {small:>19,} {'cannot run':>13} {'small_cache':>12}")
        else:
            fewer = "flash" if flash < small else "small_cache"
            print(f"{d:>4} {m:>7} {m / (d * d):>7.4g} {small:>19,} {flash:>13,} {fewer:>12}")
    sys.stdout.flush()
    print("crossover (the first M of a doubling scan at which flash misses fewer lines than small_cache):")
    for d in (64, 128, 256):
        m = d * d // 16
        while m <= 16 * d * d:
            small, flash = all_misses(args, [(n, d, m, a) for a in algorithms])
            if flash is not None and flash < small:
                print(f"  d = {d}: M = {m} = {m / (d * d):.3g} d^2 (flash {flash:,}, small_cache {small:,} misses)")
                break
            m *= 2
        else:
            print(f"  d = {d}: small_cache misses fewer lines at every M up to 16 d^2")
        sys.stdout.flush()


def check_cases(n, d):
    """--check's cases for head_dim d: every schedule on every mask, forward and backward, at M =
    d^2 / 8, d^2 / 4, d^2, 4 d^2 and n d from agrees_from_words(d) on (2 L^2 = 512 words for d >= 64,
    32 L^2 = 8192 below), and at that M itself. For d >= 64 also twice d: dense small_cache at 2 L^2,
    4 L^2 and 8 L^2 and flash at each pass's smallest M, which lies above 2 L^2 there."""
    low = agrees_from_words(d)
    sizes = sorted({m for m in (d * d // 8, d * d // 4, d * d, 4 * d * d, n * d) if m >= low} | {low})
    cases = [(n, d, m, algorithm, pass_, mask)
             for algorithm in ("flash", "small_cache")
             for mask in MASKS
             for pass_ in ("fwd", "bwd")
             for m in sizes]
    if d >= 64:
        cases += [(n, 2 * d, m, "small_cache", pass_, "full") for pass_ in ("fwd", "bwd") for m in (low, 2 * low, 4 * low)]
        cases += [(n, 2 * d, flash_smallest_words(2 * d, pass_), "flash", pass_, "full") for pass_ in ("fwd", "bwd")]
    if d == 64:  # planned for time: flash's backward as one loop, dQ read back and written per visit
        cases += [(n, d, m, "flash", "bwd", mask, "time") for mask in MASKS if mask != "random:p=0.05" for m in (d * d, 4 * d * d)]
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--valgrind", default="valgrind")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--d", type=int, default=64, help="head_dim of --table and --claims")
    parser.add_argument("--dims", type=lambda text: [int(x) for x in text.split(",")], default=[64],
                        help="--check: the head dims, comma-separated (default 64)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="simulations run at once (default: the cores)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--table", action="store_true")
    mode.add_argument("--claims", action="store_true")
    args = parser.parse_args()
    n, d = args.n, args.d
    if args.claims:
        claims(args)
        return
    if args.check:
        rows = rows_of(args, [case for d in args.dims for case in check_cases(n, d)])
        print_rows(rows)
        outside = [r for r in rows if not BAND[0] <= r["ratio"] <= BAND[1]]
        if outside:
            print(f"cache_sim_check: {len(outside)} rows outside [{BAND[0]}, {BAND[1]}]")
            sys.exit(1)
        print(f"cache_sim_check: all {len(rows)} rows within [{BAND[0]}, {BAND[1]}]")
        return
    rows = rows_of(args, [(n, d, m, algorithm, pass_, mask)
                          for algorithm in ("flash", "small_cache")
                          for mask in MASKS
                          for pass_ in ("fwd", "bwd")
                          for m in sorted({d * d // 8, d * d // 4, d * d, 4 * d * d, n * d})])
    print_rows(rows)


if __name__ == "__main__":
    main()
