#!/usr/bin/env python3
"""Fit or check the exchange rates of PlanObjective::time on this machine.

Auto (under the API's default objective, time) runs the algorithm with the smaller time price
(include/spattn/plan.hpp): flash's words, flops and pairs of partial tiles, small_cache's words,
entry visits, walk steps and flops, each at a rate in flash flops. The built-in rates were fitted
by this script on the machines docs/results.md names; this script measures whether they hold on
the machine it runs on, and fits its own.

What it does: times flash and small_cache alone (`spattn_bench --threads 1`) over masks of many
kinds, reads each case's work terms from `spattn plan --objective time`, and
  - reports, for the rates in use (`spattn plan` prints them), where auto's choice would have run
    an algorithm more than 10 % slower than the other (the bench's auto target, single-thread);
  - fits time = c * price by least squares on relative error, c in seconds per flash flop, and
    prints the rates of that fit (in flash flops, as plan.hpp states them), their misses, and the
    SPATTN_TIME_RATES line that makes the library plan with them. A fit changes small_cache's
    time tiles and so the measurements: run again with the new rates to check them out of sample.

Usage (from the repository root, after building):
    python3 scripts/fit_time_rates.py [--build build] [--n 1024,2048,4096] [--d 64,128]
                                      [--reps 3] [--masks SPEC;SPEC;...] [--data FILE]
                                      [--memory words|lines]
`--data FILE` saves the measurements (JSON) and reuses them when the file exists (refit without
re-running). `--memory lines` prices the words of each run's predicted lines of 16 words in place
of its words (both are read from the plan): the check of whether time over a mask follows lines
(docs/results.md, section 2.4). Pure Python 3 (no numpy), so it runs wherever the project builds.
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

DEFAULT_MASKS = [
    "random:p=0.002", "random:p=0.005", "random:p=0.01", "random:p=0.02", "random:p=0.05",
    "random:p=0.1", "random:p=0.2", "sliding_window:w=128", "bigbird", "documents:num_docs=8",
    "random_blocks:p=0.1", "causal", "dilated_window:w=64,dilation=4",
]

# The line size of `spattn plan`'s predicted lines (its default, 64 bytes of fp32).
LINE_WORDS = 16

# The terms of each algorithm's price, in the order of the fitted coefficients.
TERMS = ["flash_flops", "words", "partial_pairs", "entry_visits", "walk_steps", "small_cache_flops"]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fit_time_rates: {' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def number(text):
    return float(text) if text else 0.0


COST_LINE = re.compile(
    r"^  (flash|small_cache): (\d+) words .*?(?:, (\d+) lines)?, ([0-9.e+]+) flops, time price ([0-9.e+]+)"
    r"(?: \(([0-9.e+]+) partial-tile pairs\))?(?: \(([0-9.e+]+) entry visits, ([0-9.e+]+) walk steps\))?")
RATE = r"([0-9.]+(?:e[+-]?\d+)?)"  # a rate as the plan prints it (a double: 26, 0.5, 1e-05)
RATES_LINE = re.compile(rf"price in flash flops: {RATE} per word, flops, {RATE} per pair of a partial tile")
SC_RATES_LINE = re.compile(rf"price: {RATE} per word, {RATE} per entry visit, {RATE} per walk step, {RATE} per flop")


def plan_terms(build, n, d, m, mask):
    """{(pass, algorithm): terms} and the rates `spattn plan` prints."""
    out = run([os.path.join(build, "spattn"), "plan", "--n", str(n), "--d", str(d), "-M", str(m),
               "--mask", mask, "--objective", "time", "--pass", "both"])
    terms, rates, pass_name = {}, {}, None
    for line in out.splitlines():
        if line.startswith("plan (forward)"):
            pass_name = "fwd"
        elif line.startswith("plan (backward)"):
            pass_name = "bwd"
        match = COST_LINE.match(line)
        if match:
            algorithm = match.group(1)
            words, flops = number(match.group(2)), number(match.group(4))
            t = dict.fromkeys(TERMS, 0.0)
            t["words"] = words
            t["lines"] = number(match.group(3))
            if algorithm == "flash":
                t["flash_flops"] = flops
                t["partial_pairs"] = number(match.group(6))
            else:
                t["small_cache_flops"] = flops
                t["entry_visits"] = number(match.group(7))
                t["walk_steps"] = number(match.group(8))
            t["price"] = number(match.group(5))
            terms[(pass_name, algorithm)] = t
        match = RATES_LINE.search(line)
        if match:
            rates.update(words=float(match.group(1)), partial_pairs=float(match.group(2)))
        match = SC_RATES_LINE.search(line)
        if match:
            rates.update(entry_visits=float(match.group(2)), walk_steps=float(match.group(3)),
                         small_cache_flops=float(match.group(4)))
    return terms, rates


def measure(args):
    cases, rates = [], {}
    for n in args.n:
        with tempfile.NamedTemporaryFile(suffix=".csv") as table:
            run([os.path.join(args.build, "spattn_bench"), "--n", str(n), "--d", *map(str, args.d),
                 "--masks", *args.masks, "--algorithms", "flash,small_cache", "--reps", str(args.reps),
                 "--max-seconds", "3", "--threads", "1", "--no-sgemm", "--csv", table.name])
            rows = list(csv.DictReader(open(table.name)))
        times = {}
        for row in rows:
            key = (row["mask"], int(row["seqlen"]), int(row["head_dim"]))
            times.setdefault(key, {})[row["algorithm"]] = row
        for (mask, seqlen, d), by_algorithm in times.items():
            m = int(next(iter(by_algorithm.values()))["cache_words"])
            terms, rates = plan_terms(args.build, seqlen, d, m, mask)
            for pass_name, column in (("fwd", "forward_ms"), ("bwd", "backward_ms")):
                case = {"mask": mask, "n": seqlen, "d": d, "pass": pass_name, "M": m}
                for algorithm in ("flash", "small_cache"):
                    case[algorithm] = dict(terms[(pass_name, algorithm)],
                                           seconds=float(by_algorithm[algorithm][column]) * 1e-3)
                cases.append(case)
        print(f"  measured n {n}: {len(cases)} cases so far", file=sys.stderr)
    return {"cases": cases, "rates": rates}


def solve(matrix, vector):
    """Least squares by the normal equations (6 unknowns: small and well conditioned enough)."""
    k = len(matrix[0])
    a = [[sum(r[i] * r[j] for r in matrix) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * v for r, v in zip(matrix, vector)) for i in range(k)]
    for col in range(k):  # Gauss-Jordan with partial pivoting
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        if abs(a[col][col]) < 1e-300:
            return None
        for r in range(k):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
                b[r] -= f * b[col]
    return [b[i] / a[i][i] for i in range(k)]


def fit(cases):
    """Seconds per unit of each term, >= 0, minimizing the squared relative error of every run."""
    rows, targets = [], []
    for case in cases:
        for algorithm in ("flash", "small_cache"):
            run_ = case[algorithm]
            rows.append([run_[t] / run_["seconds"] for t in TERMS])
            targets.append(1.0)
    active = list(range(len(TERMS)))
    while True:  # drop a term whose coefficient goes negative, refit (a tiny active-set method)
        x = solve([[r[i] for i in active] for r in rows], targets)
        if x is None:
            sys.exit("fit_time_rates: the cases do not determine the rates (too few kinds of mask?)")
        worst = min(range(len(active)), key=lambda i: x[i])
        if x[worst] >= 0:
            coefficients = dict.fromkeys(TERMS, 0.0)
            coefficients.update({TERMS[i]: v for i, v in zip(active, x)})
            return coefficients
        del active[worst]


def price(run_, rates):
    return sum(run_[t] * rates[t] for t in TERMS)


def report(cases, rates, label):
    """Where the cheaper price runs more than 10 % slower than the other algorithm."""
    misses, ratios = [], {"flash": [], "small_cache": []}
    scale = sorted(case[a]["seconds"] / price(case[a], rates) for case in cases for a in ratios)
    unit = scale[len(scale) // 2]  # seconds per unit of price, the median over all runs
    for case in cases:
        prices = {a: price(case[a], rates) for a in ratios}
        chosen = min(ratios, key=lambda a: (prices[a], a != "flash"))
        other = "small_cache" if chosen == "flash" else "flash"
        slower = case[chosen]["seconds"] / case[other]["seconds"]
        for a in ratios:
            ratios[a].append(prices[a] * unit / case[a]["seconds"])
        if slower > 1.10:
            misses.append(f"    {case['mask']} n {case['n']} d {case['d']} {case['pass']}: auto would run "
                          f"{chosen}, {slower:.2f}x the time of {other} (prices {prices['flash']:.3g} "
                          f"flash / {prices['small_cache']:.3g} small_cache)")
    print(f"{label}: " + ", ".join(f"{t} {rates[t]:.4g}" for t in TERMS))
    for a, values in ratios.items():
        values.sort()
        print(f"  predicted / measured time, {a}: {values[0]:.2f} to {values[-1]:.2f}, "
              f"median {values[len(values) // 2]:.2f}")
    print(f"  auto's choice more than 10 % slower than the other: {len(misses)} of {len(cases)}")
    for line in misses:
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--n", default="1024,2048,4096")
    parser.add_argument("--d", default="64,128")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--masks", default=";".join(DEFAULT_MASKS), help="PATTERN-SPECs separated by ';'")
    parser.add_argument("--data", help="JSON file: the measurements are saved there, or read if it exists")
    parser.add_argument("--memory", choices=("words", "lines"), default="words",
                        help="what the rate per word multiplies over a mask: the words moved (as the library "
                             f"prices them) or the words of the predicted lines (lines x {LINE_WORDS})")
    args = parser.parse_args()
    args.n = [int(v) for v in args.n.split(",")]
    args.d = [int(v) for v in args.d.split(",")]
    args.masks = [m for m in args.masks.split(";") if m]

    if args.data and os.path.exists(args.data):
        data = json.load(open(args.data))
        print(f"measurements from {args.data}", file=sys.stderr)
    else:
        data = measure(args)
        if args.data:
            json.dump(data, open(args.data, "w"), indent=1)
    cases, in_use = data["cases"], data["rates"]
    if args.memory == "lines":
        for case in cases:
            for algorithm in ("flash", "small_cache"):
                run_ = case[algorithm]
                if not run_.get("lines"):
                    sys.exit(f"fit_time_rates: no predicted lines for {algorithm} on {case['mask']} n {case['n']}")
                run_["words"] = run_["lines"] * LINE_WORDS
    print(f"the rate per word prices {'the words of the predicted lines' if args.memory == 'lines' else 'the words moved'}")

    current = dict(in_use, flash_flops=1.0)
    report(cases, current, "rates in use (flash flops per unit)")
    c = fit(cases)
    if c["flash_flops"] <= 0:
        sys.exit("fit_time_rates: the fit gives flash's flops no time; not a usable price")
    fitted = {t: c[t] / c["flash_flops"] for t in TERMS}
    print(f"\nfitted: {c['flash_flops'] * 1e12:.3f} ps per flash flop")
    report(cases, fitted, "fitted rates (flash flops per unit; in-sample: check them on a second run)")
    names = {"words": "word", "partial_pairs": "partial_pair", "entry_visits": "entry_visit",
             "walk_steps": "walk_step", "small_cache_flops": "small_cache_flop"}
    print("  to plan with them: SPATTN_TIME_RATES=" +
          ",".join(f"{names[t]}={fitted[t]:.3g}" for t in TERMS if t in names))


if __name__ == "__main__":
    main()
