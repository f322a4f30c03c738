"""Two spattn_bench binaries (a baseline and a candidate) on the same cases, in turns, in one run.

    python3 bench/compare_binaries.py OLD/spattn_bench NEW/spattn_bench [--pairs 11]
        [-- spattn_bench arguments (default: --n 4096 --d 64 --algorithms auto --threads 2 --reps 5)]

The two binaries run alternately (old, new, old, new, ...) so that a drift in the machine's speed
falls on both; each run writes its rows as CSV. Per case (mask, n, d, algorithm, M) it prints the
median of each binary's fwd, bwd and fwd+bwd milliseconds over the pairs, and the median over the
pairs of the per-pair ratio new / old of fwd+bwd with its min and max: a ratio above 1 is slower.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_ARGS = ["--n", "4096", "--d", "64", "--algorithms", "auto", "--threads", "2", "--reps", "5"]


def run(binary, args, path):
    subprocess.run([binary, *args, "--no-sgemm", "--csv", path], check=True, stdout=subprocess.DEVNULL)
    with open(path, newline="") as f:
        return {(r["mask"], r["seqlen"], r["head_dim"], r["algorithm"], r["cache_words"]): r for r in csv.DictReader(f)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--pairs", type=int, default=11)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    bench_args = argv[split + 1:] or DEFAULT_ARGS
    runs = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            for label in ("old", "new"):
                runs[label].append(run(getattr(args, label), bench_args, os.path.join(tmp, f"{label}{i}.csv")))
    print(f"old: {args.old}\nnew: {args.new}\nspattn_bench {' '.join(bench_args)}; {args.pairs} pairs, taken in turns")
    print(f"{'mask':<16} {'ran':<12} {'old fwd':>8} {'new fwd':>8} {'old bwd':>8} {'new bwd':>8} {'old both':>9} {'new both':>9} "
          f"{'new/old':>8} {'min':>6} {'max':>6}")
    for key in runs["old"][0]:
        if any(key not in r for r in runs["old"] + runs["new"]):
            print(f"{key[0]:<16} missing from a run", file=sys.stderr)
            continue
        med = {(label, col): statistics.median(float(r[key][col]) for r in runs[label])
               for label in runs for col in ("forward_ms", "backward_ms", "both_ms")}
        ratios = [float(n[key]["both_ms"]) / float(o[key]["both_ms"]) for o, n in zip(runs["old"], runs["new"])]
        ran = runs["new"][0][key]["forward_ran"]
        print(f"{key[0]:<16} {ran:<12} {med['old', 'forward_ms']:>8.2f} {med['new', 'forward_ms']:>8.2f} "
              f"{med['old', 'backward_ms']:>8.2f} {med['new', 'backward_ms']:>8.2f} {med['old', 'both_ms']:>9.2f} "
              f"{med['new', 'both_ms']:>9.2f} {statistics.median(ratios):>8.3f} {min(ratios):>6.3f} {max(ratios):>6.3f}")


if __name__ == "__main__":
    main()
