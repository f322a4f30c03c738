"""spattn.torch.distributed: words each rank sends against a plain ring, and time per fwd+bwd.

    PYTHONPATH=build/python /usr/bin/python3 bench/distributed_bench.py [--n 65536] [--worlds 1 2] [--reps 3]

For a sliding window of half-width 512 and packed documents (n = 65536, d = 64, one head, float32):
  1. From the exchange plan alone (no processes), for world sizes 2 to 8: the most words any rank
     sends in the forward (K, V), also in shards (one rank's K and V), and in one fwd+bwd (with dK,
     dV), beside a plain ring's; and the words that cross a document boundary (keys sent to a rank
     none of whose queries share the key's document).
  2. Measured over gloo for --worlds (spawned processes on this machine, one thread each): the
     median seconds per fwd+bwd, the counted words per rank (equal to the prediction), and the
     largest peak RSS of a rank.
A machine with C cores runs at most C ranks at full speed: more ranks share the cores.
"""

import argparse
import datetime
import multiprocessing
import os
import platform
import resource
import statistics
import tempfile
import time

import torch

MASKS = {"window 512": "sliding_window:w=512", "documents": "documents:num_docs=6", "window 256": "sliding_window:w=256"}
DEFAULT_MASKS = ["window 512", "documents"]


def document_of(spec: str, n: int) -> torch.Tensor:
    """Each position's document under documents:num_docs=D (even_lengths: doc d ends at (d+1) n / D)."""
    docs = int(spec.split("num_docs=")[1])
    ends = [(d + 1) * n // docs for d in range(docs)]
    return torch.bucketize(torch.arange(n), torch.tensor(ends), right=True)


def predicted_table(n: int, d: int, masks) -> None:
    import spattn.torch as st
    import spattn.torch.distributed as sd

    print(f"Predicted words sent by the busiest rank, n {n}, d {d}, 1 head; a shard is one rank's K and V "
          f"(2 d n / world words)")
    print(f"{'mask':<11} {'world':>5} {'fwd sent':>11} {'shards':>6} {'ring shards':>11} "
          f"{'fwd+bwd sent':>13} {'ring fwd+bwd':>13} {'ring / spattn':>13} {'cross-doc':>9}")
    for label in masks:
        spec = MASKS[label]
        mask = st.Mask.from_spec(spec, n, n)
        docs = document_of(spec, n) if spec.startswith("documents") else None
        for world in range(2, 9):
            sharding = sd.Sharding.contiguous(n, world)
            plan = sd.ExchangePlan([mask], sharding, sharding)
            forward, both, ring_forward, ring_both = [], [], [], []
            for rank in range(world):
                words = plan.predicted(rank, 1, 1, d, d)
                ring = plan.ring(rank, 1, 1, d, d)
                forward.append(words["forward"]["sent"].total)
                both.append(words["forward"]["sent"].total + words["backward"]["sent"].total)
                ring_forward.append(ring["forward"]["sent"].total)
                ring_both.append(ring["forward"]["sent"].total + ring["backward"]["sent"].total)
            shard = 2 * d * n / world
            cross = "-"
            if docs is not None:  # keys sent to a rank none of whose queries is in the key's document
                cross = 0
                for source in range(world):
                    keys = sharding.positions(source)
                    for rank in range(world):
                        sent_docs = docs[keys[plan.send_index[source][rank]]]
                        cross += int((~torch.isin(sent_docs, docs[sharding.positions(rank)])).sum()) * 2 * d
            ratio = f"{max(ring_both) / max(both):.1f}" if max(both) else "-"
            print(f"{label:<11} {world:>5} {max(forward):>11,} {max(forward) / shard:>6.2f} "
                  f"{max(ring_forward) / shard:>11.2f} {max(both):>13,} {max(ring_both):>13,} {ratio:>13} {cross:>9}")


def rank_main(rank, world, init_file, n, d, spec, reps, result_file):
    torch.set_num_threads(1)
    import torch.distributed as dist

    import spattn.torch as st
    import spattn.torch.distributed as sd

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    mask = st.Mask.from_spec(spec, n, n)
    sharding = sd.Sharding.contiguous(n, world)
    generator = torch.Generator().manual_seed(rank)
    local = sharding.length(rank)
    q, k, v = (torch.randn(1, 1, local, d, generator=generator).requires_grad_() for _ in range(3))
    d_out = torch.randn(1, 1, local, d, generator=generator)
    times, ledger = [], None
    for rep in range(reps + 1):  # the first builds the plan and the masks: not timed
        ledger = sd.CommLedger()
        dist.barrier()
        start = time.perf_counter()
        out = sd.attention(q, k, v, mask, sharding=sharding, threads=1, ledger=ledger)
        out.backward(d_out)
        dist.barrier()
        if rep:
            times.append(time.perf_counter() - start)
    sent = ledger.counted["forward"]["sent"].total + ledger.counted["backward"]["sent"].total
    exact = ledger.counted == ledger.predicted
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    torch.save({"seconds": statistics.median(times), "sent": sent, "exact": exact, "peak_mib": peak_mib}, result_file)
    dist.destroy_process_group()


def measured_table(n: int, d: int, worlds, reps: int, masks) -> None:
    print(f"\nMeasured over gloo: median seconds per fwd+bwd ({reps} reps, 1 thread per rank), words sent per rank")
    print(f"{'mask':<11} {'world':>5} {'seconds':>8} {'max sent':>13} {'counted == predicted':>21} {'peak RSS MiB':>13}")
    context = multiprocessing.get_context("spawn")
    for label in masks:
        spec = MASKS[label]
        for world in worlds:
            with tempfile.TemporaryDirectory() as tmp:
                files = [os.path.join(tmp, f"rank-{r}.pt") for r in range(world)]
                processes = [context.Process(target=rank_main, args=(r, world, os.path.join(tmp, "init"), n, d, spec, reps, files[r]))
                             for r in range(world)]
                for p in processes:
                    p.start()
                for p in processes:
                    p.join()
                if any(p.exitcode != 0 for p in processes):
                    raise SystemExit(f"{label}, world {world}: a rank failed (exit codes {[p.exitcode for p in processes]})")
                results = [torch.load(f) for f in files]
            seconds = max(r["seconds"] for r in results)
            print(f"{label:<11} {world:>5} {seconds:>8.3f} {max(r['sent'] for r in results):>13,} "
                  f"{str(all(r['exact'] for r in results)):>21} {max(r['peak_mib'] for r in results):>13.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=65536)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--worlds", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--masks", nargs="*", default=DEFAULT_MASKS, choices=list(MASKS),
                        help=f"which masks (default: {' and '.join(DEFAULT_MASKS)})")
    parser.add_argument("--no-predicted", action="store_true", help="skip the predicted table (world sizes 2 to 8)")
    args = parser.parse_args()
    print(f"spattn.torch.distributed | {platform.processor() or platform.machine()} | {os.cpu_count()} cores | "
          f"torch {torch.__version__} | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if not args.no_predicted:
        predicted_table(args.n, args.d, args.masks)
    if args.worlds:
        measured_table(args.n, args.d, args.worlds, args.reps, args.masks)


if __name__ == "__main__":
    main()
