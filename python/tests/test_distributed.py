"""spattn.torch.distributed over gloo: world sizes 1 to 4 in spawned processes, every rank's shards
assembled and checked against the fp64 reference (within twice the naive float32 error, as the
single-process tests), forward and backward; bitwise repeats; counted == predicted words; a rank
that dies or stalls makes the others raise instead of hanging."""

import multiprocessing
import os
import time

import pytest
import torch

import distributed_worker as worker
import spattn.torch as st
import spattn.torch.distributed as sd
from conftest import dense_attention, head_masks
from spattn.testing import within_tolerance

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo is not available in this torch")

DEADLINE_S = 120  # a whole spawn; a hang fails the test instead of blocking it


def case(name, spec, n, world_size, **extra):
    base = {"name": name, "spec": spec, "n": n, "world_size": world_size, "batch": 1, "heads": 2, "kv_heads": 2, "dim": 16}
    base.update(extra)
    return base


def cases_for(world_size):
    """The mask library at odd lengths (none a multiple of the world size), with each sharding."""
    w = world_size
    cases = [
        case("full", "full", 97, w),
        case("causal", "causal", 97, w, sharding="zigzag"),
        case("sliding window", "sliding_window:w=5", 101, w),
        case("documents across shard boundaries", "documents:lengths=30/41/26,causal=1", 97, w),
        case("bigbird", "bigbird:block=8,w=1,g=1,r=1,seed=4", 96 + w, w, sharding="lpt"),
        case("random", "random:p=0.2,seed=2", 61, w, sharding="lpt"),
        case("empty rows", "random:p=0.02,seed=9", 33, w),
        case("a rank attending nothing", "silent_last_rank", 37, w),
        case("grouped-query heads, batch 2", "causal", 45, w, batch=2, heads=4, kv_heads=2, algorithm="flash"),
        case("per-head masks", ["causal", "sliding_window:w=2", "random:p=0.3,seed=1"], 31, w, heads=3, kv_heads=1,
             algorithm="small_cache"),
    ]
    if w == 1:
        cases.append(case("one position", "full", 1, w))
    return cases


def spawn(world_size, tmp_path, cases, behaviour="normal", timeout_s=60, wait_for=None):
    """Runs distributed_worker.main on every rank (group timeout `timeout_s`); returns the ranks
    still running at the deadline, the ranks' errors and exit codes. Waits for the ranks in
    `wait_for` (default all), then kills whatever still runs."""
    context = multiprocessing.get_context("spawn")
    init_file = tmp_path / "rendezvous"
    processes = [context.Process(target=worker.main,
                                 args=(r, world_size, str(init_file), str(tmp_path), cases, behaviour, timeout_s))
                 for r in range(world_size)]
    for p in processes:
        p.start()
    deadline = time.monotonic() + DEADLINE_S
    for r in (range(world_size) if wait_for is None else wait_for):
        processes[r].join(max(0.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(processes) if p.is_alive()]
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join()
    errors = {r: (tmp_path / f"rank-{r}.err").read_text() for r in range(world_size) if (tmp_path / f"rank-{r}.err").exists()}
    return hung, errors, [p.exitcode for p in processes]


def results_of(world_size, tmp_path, cases):
    hung, errors, _ = spawn(world_size, tmp_path, cases)
    assert not hung, f"ranks {hung} still ran after {DEADLINE_S} s"
    assert not errors, "\n".join(f"rank {r}:\n{text}" for r, text in errors.items())
    return [torch.load(tmp_path / f"rank-{r}.pt") for r in range(world_size)]


def reference(c, masks):
    """fp64 reference and naive float32 (output, dq, dk, dv) of the whole sequence in one process."""
    q, k, v, d_out = worker.inputs(c)
    dense_mask = head_masks(masks, c["heads"]).unsqueeze(0)
    found = {}
    for name, dtype in (("exact", torch.float64), ("naive", torch.float32)):
        qq, kk, vv = (x.to(dtype).requires_grad_() for x in (q, k, v))
        out = dense_attention(qq, kk, vv, dense_mask)[0]
        out.backward(d_out.to(dtype))
        found[name] = [t.detach().double() for t in (out, qq.grad, kk.grad, vv.grad)]
    return found


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_sharded_attention_matches_the_single_process_reference(world_size, tmp_path):
    cases = cases_for(world_size)
    ranks = results_of(world_size, tmp_path, cases)
    for index, c in enumerate(cases):
        masks = worker.build_masks(c)
        sharding = worker.sharding_of(c, masks)
        found = {name: sharding.assemble([ranks[r][index]["tensors"][name] for r in range(world_size)]).double()
                 for name in ("out", "dq", "dk", "dv")}
        expected = reference(c, masks)
        for position, name in enumerate(("out", "dq", "dk", "dv")):
            exact = expected["exact"][position]
            error = (found[name] - exact).abs().max().item()
            naive = (expected["naive"][position] - exact).abs().max().item()
            assert within_tolerance(error, naive, exact.abs().max().item()), \
                f"{c['name']}, world size {world_size}: {name} error {error:.3g}, naive {naive:.3g}"
        total_pairs = sum(m.nnz for m in (masks if isinstance(masks, list) else [masks]))
        if total_pairs:
            # With one key per row dS = P (dP - D) is exactly zero, and so is dK: check dV there.
            grad = "dk" if c["n"] > 1 else "dv"
            assert found["out"].abs().max() > 0 and found[grad].abs().max() > 0, f"{c['name']}: trivial outputs"
        lse = sharding.assemble([ranks[r][index]["tensors"]["lse"] for r in range(world_size)])
        empty_rows = head_masks(masks, c["heads"]).sum(-1) == 0
        assert torch.isneginf(lse[:, empty_rows]).all() and torch.isfinite(lse[:, ~empty_rows]).all()
        for r in range(world_size):
            entry = ranks[r][index]
            assert entry["counted"] == entry["predicted"], f"{c['name']}, rank {r}: counted {entry['counted']} != predicted"
            forward = entry["counted"]["forward"]
            received = forward["received"]["k"] + forward["received"]["v"]
            assert received == entry["lower_bound"], f"{c['name']}, rank {r}: received {received}, bound {entry['lower_bound']}"
            assert received <= entry["ring"]["forward"]["received"]["k"] + entry["ring"]["forward"]["received"]["v"]


def test_the_exchange_sends_only_what_the_mask_reads(tmp_path):
    """Window: neighbours only; documents aligned with the shards: nothing; causal: only downward."""
    window = st.Mask.from_spec("sliding_window:w=8", 128, 128)
    plan = sd.ExchangePlan([window], sd.Sharding.contiguous(128, 4), sd.Sharding.contiguous(128, 4))
    for source in range(4):
        for rank in range(4):
            count = plan.send_index[source][rank].numel()
            assert count == (8 if abs(source - rank) == 1 else 0), (source, rank, count)
    documents = st.Mask.from_spec("documents:lengths=32/32/64", 128, 128)
    plan = sd.ExchangePlan([documents], sd.Sharding.contiguous(128, 4), sd.Sharding.contiguous(128, 4))
    moved = {(s, r): plan.send_index[s][r].numel() for s in range(4) for r in range(4) if plan.send_index[s][r].numel()}
    assert moved == {(2, 3): 32, (3, 2): 32}, moved
    causal = st.Mask.from_spec("causal", 128, 128)
    plan = sd.ExchangePlan([causal], sd.Sharding.contiguous(128, 4), sd.Sharding.contiguous(128, 4))
    assert all(plan.send_index[s][r].numel() == (32 if s < r else 0) for s in range(4) for r in range(4) if s != r)
    words = plan.predicted(3, 1, 1, 64, 64)
    assert words["forward"]["received"]["k"] == 96 * 64 and words["backward"]["sent"]["dv"] == 96 * 64
    assert plan.ring(0, 1, 1, 64, 64)["forward"]["received"]["k"] == 96 * 64


def test_balance_evens_out_the_pairs_of_a_causal_mask():
    mask = st.Mask.from_spec("causal", 1000, 1000)
    contiguous = sd.balance(mask, 4, strategy="contiguous")
    zigzag = sd.balance(mask, 4, strategy="zigzag")
    lpt = sd.balance(mask, 4)
    assert contiguous.imbalance > 1.7  # the last quarter holds 7/16 of the pairs
    assert zigzag.imbalance < 1.01 and lpt.imbalance < 1.05
    for sharding in (contiguous, zigzag, lpt):
        assert sorted(sharding.permutation.tolist()) == list(range(1000))
        assert sum(sharding.pairs) == mask.nnz
        assert max(sharding.length(r) for r in range(4)) - min(sharding.length(r) for r in range(4)) <= 32
    assert zigzag.ranges[0] == [(0, 125), (875, 1000)]


def test_sharding_refuses_bad_ranges_by_name():
    with pytest.raises(ValueError, match=r"ranges\[1\]\[0\] = \(3, 6\) overlaps a range of rank 0"):
        sd.Sharding([[(0, 4)], [(3, 6)]], 6)
    with pytest.raises(ValueError, match="position 5 of 6 belongs to no rank"):
        sd.Sharding([[(0, 3)], [(3, 5)]], 6)
    with pytest.raises(ValueError, match=r"not within \[0, 6\]"):
        sd.Sharding([[(0, 7)]], 6)
    with pytest.raises(ValueError, match="strategy must be"):
        sd.balance(st.Mask.full(8, 8), 2, strategy="round_robin")
    with pytest.raises(ValueError, match="must be square"):
        sd.balance(st.Mask.full(8, 9), 2)


def test_the_call_needs_an_initialized_group():
    q = torch.zeros(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match="torch.distributed is not initialized"):
        sd.attention(q, q, q, st.Mask.full(4, 4))


@pytest.mark.parametrize("behaviour", ["last_rank_dies", "last_rank_stalls"])
def test_a_failed_or_stalled_rank_is_an_error_not_a_hang(behaviour, tmp_path):
    """The last rank dies after the rendezvous, or stalls there for 60 s: rank 0 must raise, within
    the group's 15 s timeout when the peer stalls."""
    start = time.monotonic()
    hung, errors, _ = spawn(2, tmp_path, [case("window", "sliding_window:w=5", 64, 2)], behaviour, timeout_s=15, wait_for=[0])
    assert 0 not in hung, "rank 0 hung"
    assert time.monotonic() - start < 55, "rank 0 waited past the group's timeout"
    assert 0 in errors and "exchange failed" in errors[0], errors.get(0, "rank 0 reported no error")
