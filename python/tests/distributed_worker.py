"""What each spawned rank of test_distributed.py runs: one gloo process group, a list of cases, and
every rank's shards of the results saved for the parent to assemble and check."""

import datetime
import os
import time
import traceback

import torch
import torch.distributed as dist

import spattn.torch as st
import spattn.torch.distributed as sd


def build_masks(case):
    """The case's global mask (or one per head). ``spec`` is a PATTERN-SPEC or one of:
    "silent_last_rank": causal, but the last contiguous shard's queries attend nothing."""
    n, spec = case["n"], case["spec"]
    if isinstance(spec, list):
        return [st.Mask.from_spec(s, n, n) for s in spec]
    if spec == "silent_last_rank":
        dense = torch.ones(n, n, dtype=torch.bool).tril()
        start = sd.Sharding.contiguous(n, case["world_size"]).ranges[-1][0][0]
        dense[start:] = False
        return st.Mask.from_dense(dense)
    return st.Mask.from_spec(spec, n, n)


def inputs(case):
    """Global q, k, v and the output gradient, the same on every rank (and in the parent)."""
    generator = torch.Generator().manual_seed(case.get("seed", 0))
    b, h, kvh, n, d = case["batch"], case["heads"], case["kv_heads"], case["n"], case["dim"]
    q = torch.randn(b, h, n, d, generator=generator)
    k = torch.randn(b, kvh, n, d, generator=generator)
    v = torch.randn(b, kvh, n, d, generator=generator)
    d_out = torch.randn(b, h, n, d, generator=generator)
    return q, k, v, d_out


def sharding_of(case, masks):
    strategy = case.get("sharding", "contiguous")
    if strategy == "contiguous":
        return sd.Sharding.contiguous(case["n"], case["world_size"])
    return sd.balance(masks, case["world_size"], strategy=strategy)


def run_case(case, rank):
    masks = build_masks(case)
    sharding = sharding_of(case, masks)
    q, k, v, d_out = inputs(case)
    results = []
    for _ in range(2):  # twice: the repeat must be bitwise identical
        ledger = sd.CommLedger()
        qq, kk, vv = (sharding.take(x, rank).requires_grad_() for x in (q, k, v))
        out, lse = sd.attention(qq, kk, vv, masks, sharding=sharding, return_lse=True,
                                algorithm=case.get("algorithm", "auto"), threads=1, ledger=ledger)
        out.backward(sharding.take(d_out, rank))
        results.append({"out": out.detach(), "lse": lse, "dq": qq.grad, "dk": kk.grad, "dv": vv.grad, "ledger": ledger})
    first, second = results
    for name in ("out", "lse", "dq", "dk", "dv"):
        if not torch.equal(first[name], second[name]):
            raise AssertionError(f"rank {rank}: {name} differs between two identical calls")
    ledger = first["ledger"]
    return {
        "tensors": {name: first[name] for name in ("out", "lse", "dq", "dk", "dv")},
        "counted": _plain(ledger.counted), "predicted": _plain(ledger.predicted), "ring": _plain(ledger.ring),
        "lower_bound": ledger.lower_bound,
    }


def _plain(table):
    return {p: {d: dict(words) for d, words in table[p].items()} for p in table}


def main(rank, world_size, init_file, out_dir, cases, behaviour="normal", timeout_s=60):
    """Runs ``cases`` on this rank; writes rank-<r>.pt with the results, or rank-<r>.err. The group's
    timeout bounds the rendezvous (ranks start seconds apart on a loaded machine) and every wait."""
    try:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        if behaviour == "last_rank_dies" and rank == world_size - 1:
            os._exit(3)
        if behaviour == "last_rank_stalls" and rank == world_size - 1:
            time.sleep(60)
            os._exit(0)
        outputs = [run_case(case, rank) for case in cases]
        torch.save(outputs, os.path.join(out_dir, f"rank-{rank}.pt"))
    except Exception:  # the parent reports it
        with open(os.path.join(out_dir, f"rank-{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        os._exit(1)
