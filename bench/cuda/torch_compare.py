#!/usr/bin/env python3
"""PyTorch's FlexAttention and scaled_dot_product_attention on the masks spattn_cuda_bench wrote,
and the comparison table: times, TFLOP/s on attended pairs (forward 4 |Omega| d per head, backward
2.5x, forward + backward 3.5x) and spattn's throughput as a fraction of each.

    torch_compare.py DIR [REPS]  (DIR holds spattn_cuda.json and NAME.row_ptr.i64 / NAME.col_idx.i64)

When spattn_cuda_bench ran with --dump, its inputs are used here too, and each mask's outputs are
checked on the first and last head against an fp64 reference (dense masked softmax, autograd), beside
FlexAttention's error on the same inputs: relative Frobenius errors of o, dq, dk, dv and the largest
lse difference.
"""
import json
import os
import sys
import time

import torch


def dense_mask(directory, name, n, device):
    def load(path):  # raw little-endian int64, as spattn_cuda_bench wrote it
        return torch.from_file(path, shared=False, size=os.path.getsize(path) // 8, dtype=torch.int64).to(device)

    row_ptr = load(f"{directory}/{name}.row_ptr.i64")
    cols = load(f"{directory}/{name}.col_idx.i64")
    rows = torch.repeat_interleave(torch.arange(n, device=device), row_ptr[1:] - row_ptr[:-1])
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    mask[rows, cols] = True
    return mask


def load_raw(path, dtype, shape):
    numel = 1
    for extent in shape:
        numel *= extent
    return torch.from_file(path, shared=False, size=numel, dtype=dtype).view(shape).to("cuda")


def reference_head(q, k, v, d_o, mask):
    """fp64 forward and backward of one head (n, d) under a dense boolean mask."""
    q, k, v = (x.double().requires_grad_(True) for x in (q, k, v))
    scores = (q @ k.T) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    prob = torch.where(mask, torch.exp(scores - lse[:, None]), torch.zeros((), dtype=torch.float64, device=q.device))
    out = prob @ v
    out.backward(d_o.double())
    return {"o": out.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def relative_error(x, ref):
    return (x.double() - ref).norm().item() / max(ref.norm().item(), 1e-300)


def check(directory, ours, name, inputs, mask, flex_outputs):
    """spattn's and FlexAttention's errors against the fp64 reference on the first and last head."""
    n, d, heads = ours["n"], ours["d"], ours["heads"]
    dtype = inputs[0].dtype
    spattn = {x: load_raw(f"{ours['dump']}/{name}.{x}.raw", dtype, (1, heads, n, d)) for x in ("o", "dq", "dk", "dv")}
    spattn["lse"] = load_raw(f"{ours['dump']}/{name}.lse.raw", torch.float32, (1, heads, n))
    worst = {}
    for h in sorted({0, heads - 1}):
        ref = reference_head(*(x[0, h] for x in inputs), mask)
        for system, outputs in (("spattn", spattn), ("flex", flex_outputs)):
            for x in ("o", "dq", "dk", "dv"):
                err = relative_error(outputs[x][0, h], ref[x])
                assert err == err, f"{name} {system} {x}: NaN"
                worst[(system, x)] = max(worst.get((system, x), 0.0), err)
            if "lse" in outputs:
                lse_err = (outputs["lse"][0, h].double() - ref["lse"]).abs().max().item()
                worst[(system, "lse")] = max(worst.get((system, "lse"), 0.0), lse_err)
        del ref
    line = " ".join(f"{x} {worst[('spattn', x)]:.2e}" for x in ("o", "dq", "dk", "dv", "lse"))
    flex_line = " ".join(f"{x} {worst[('flex', x)]:.2e}" for x in ("o", "dq", "dk", "dv"))
    ratio = max(worst[("spattn", x)] / max(worst[("flex", x)], 1e-30) for x in ("o", "dq", "dk", "dv"))
    print(f"{name}: check vs fp64 (heads 0 and {heads - 1}): spattn {line}; flex {flex_line}; "
          f"worst spattn/flex error ratio {ratio:.2f}")
    return ratio


def flex_outputs_of(attend, inputs):
    q, k, v, d_o = (x.detach().clone() for x in inputs)
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    out = attend(q, k, v)
    out.backward(d_o)
    return {"o": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def timed_ms(fn, reps):
    fn()  # warm-up (and compilation)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def measure(attend, q, k, v, grad, reps):
    """Forward, backward (from a stored forward) and forward + backward of attend(q, k, v)."""
    qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (q, k, v))

    def forward():
        with torch.no_grad():
            attend(q, k, v)

    def both():
        out = attend(qg, kg, vg)
        out.backward(grad)

    holder = {}

    def prepare():
        holder["out"] = attend(qg, kg, vg)

    def backward_only():
        holder["out"].backward(grad, retain_graph=True)

    fwd = timed_ms(forward, reps)
    prepare()
    bwd = timed_ms(backward_only, reps)
    holder.clear()
    return fwd, bwd, timed_ms(both, reps)


def main():
    directory = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with open(f"{directory}/spattn_cuda.json") as f:
        ours = json.load(f)
    n, d, heads = ours["n"], ours["d"], ours["heads"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[ours["dtype"]]
    device = "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; n {n}, d {d}, heads {heads}, {ours['dtype']}")
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention)
    torch.manual_seed(0)
    if ours.get("dump"):
        inputs = [load_raw(f"{ours['dump']}/{x}.raw", dtype, (1, heads, n, d)) for x in ("q", "k", "v", "do")]
    else:
        inputs = [torch.randn(1, heads, n, d, device=device, dtype=dtype) for _ in range(4)]
    q, k, v, grad = inputs
    rows = []
    worst_ratio = 0.0
    for entry in ours["masks"]:
        name = entry["name"]
        mask = dense_mask(directory, name, n, device)
        nnz = int(mask.sum().item())
        assert nnz == entry["nnz"], f"{name}: mask has {nnz} pairs, spattn counted {entry['nnz']}"

        def mask_mod(b, h, q_idx, kv_idx):
            return mask[q_idx, kv_idx]

        t0 = time.time()
        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device=device)
        print(f"{name}: block mask built in {time.time() - t0:.1f} s")
        flops = 4.0 * nnz * d * heads
        results = {"spattn": (entry["fwd_ms"], entry["bwd_ms"], entry["fwd_bwd_ms"])}
        results["flex"] = measure(lambda a, b, c: flex(a, b, c, block_mask=block_mask), q, k, v, grad, reps)
        if ours.get("dump"):
            flex_out = flex_outputs_of(lambda a, b, c: flex(a, b, c, block_mask=block_mask), inputs)
            worst_ratio = max(worst_ratio, check(directory, ours, name, inputs, mask, flex_out))
            del flex_out
        sdpa_mask = mask.view(1, 1, n, n)
        try:
            results["sdpa"] = measure(
                lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a, b, c, attn_mask=sdpa_mask),
                q, k, v, grad, reps)
        except RuntimeError as error:  # e.g. out of memory for the dense mask's bias
            print(f"{name}: sdpa failed: {error}")
        del mask
        for system, (fwd, bwd, both) in results.items():
            rows.append((name, system, fwd, bwd, both, flops / fwd / 1e9, 2.5 * flops / bwd / 1e9,
                         3.5 * flops / both / 1e9))
        for other in ("flex", "sdpa"):
            if other in results:
                mine, theirs = results["spattn"], results[other]
                print(f"{name}: spattn / {other} throughput: fwd {theirs[0] / mine[0]:.3f}, "
                      f"bwd {theirs[1] / mine[1]:.3f}, fwd+bwd {theirs[2] / mine[2]:.3f}")
    print(f"\n{'mask':16} {'system':7} {'fwd ms':>9} {'bwd ms':>9} {'f+b ms':>9} "
          f"{'fwd TF/s':>9} {'bwd TF/s':>9} {'f+b TF/s':>9}")
    for row in rows:
        print(f"{row[0]:16} {row[1]:7} {row[2]:9.3f} {row[3]:9.3f} {row[4]:9.3f} {row[5]:9.2f} {row[6]:9.2f} {row[7]:9.2f}")
    if ours.get("dump"):
        print(f"worst spattn/flex error ratio over masks and outputs: {worst_ratio:.2f}")
        if worst_ratio > 2.0:
            print("CHECK FAILED: spattn's error exceeds twice FlexAttention's")
            sys.exit(1)


if __name__ == "__main__":
    main()
