"""A conformance suite for attention implementations: spattn's pattern library and its fp64
reference, usable on any function with spattn.torch.attention's signature.

    from spattn.testing import conformance
    table = conformance(my_attention)          # my_attention(q, k, v, mask) -> output
    assert all(row.passed for row in table)

Each case runs the function forward and backward on float32 inputs (or float16 / bfloat16 ones:
``conformance(fn, dtype=torch.bfloat16)``) over one mask (or one mask per head) and compares the
output and dq, dk, dv with spattn's fp64 reference on the same values. A case passes when every
error is at most twice the error of the same computation done naively in that dtype (dense masked
attention; for 16-bit dtypes computed in float32 with every intermediate and gradient rounded to
the dtype, since torch 1.13 has no float16 matmul on the CPU) against the same reference, as
FlashAttention's tests do, plus a floor of 8 float32 ulps of the result's largest magnitude (naive
fp32 errors can be a single ulp, and a tiled sum in another order legitimately differs by a few). ``python -m spattn.conformance module:function`` prints the table.
"""

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch

from .torch import Mask, attention


_ULP_FLOOR = 8 * torch.finfo(torch.float32).eps


def within_tolerance(error: float, naive_error: float, largest: float) -> bool:
    """The suite's rule: error <= 2 x the naive float32 error + 8 ulps of the largest magnitude
    (False for NaN)."""
    return error <= 2 * naive_error + _ULP_FLOOR * max(1.0, largest)


@dataclass
class Case:
    """One conformance case: shapes and the mask spec(s) (one for all heads, or one per head)."""

    name: str
    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    specs: Union[str, Sequence[str]]

    def masks(self) -> Union[Mask, List[Mask]]:
        if isinstance(self.specs, str):
            return Mask.from_spec(self.specs, self.seqlen_q, self.seqlen_k)
        return [Mask.from_spec(spec, self.seqlen_q, self.seqlen_k) for spec in self.specs]


@dataclass
class Result:
    case: Case
    errors: Tuple[float, float, float, float]  # o, dq, dk, dv: largest absolute error against fp64
    naive_errors: Tuple[float, float, float, float]
    passed: bool
    failure: Optional[str] = field(default=None)  # the first quantity out of tolerance, or the exception


def default_cases() -> List[Case]:
    """The pattern library over odd sizes, an empty row, rectangular shapes, GQA and per-head masks."""
    cases = []
    for n in (1, 7, 97):
        for spec in ("full", "causal", "sliding_window:w=4", "random:p=0.2,seed=2", f"documents:num_docs={min(3, n)}"):
            cases.append(Case(f"{spec.split(':')[0]} n={n}", 1, 2, 2, n, n, 16, spec))
    cases += [
        Case("bigbird n=64", 1, 2, 1, 64, 64, 16, "bigbird:block=8,w=1,g=1,r=1,seed=4"),
        Case("dilated window n=61", 1, 2, 2, 61, 61, 8, "dilated_window:w=6,dilation=2"),
        Case("empty rows 33x33", 1, 2, 2, 33, 33, 8, "random:p=0.02,seed=9"),
        Case("rectangular 29x45 causal", 2, 2, 2, 29, 45, 8, "causal"),
        Case("rectangular 45x29 window", 1, 2, 2, 45, 29, 8, "sliding_window:w=3"),
        Case("grouped-query 4 over 2, n=37", 1, 4, 2, 37, 37, 16, "causal"),
        Case("per-head masks n=31", 1, 3, 1, 31, 31, 8, ["causal", "sliding_window:w=2", "random:p=0.3,seed=1"]),
    ]
    return cases


def naive_attention(q, k, v, dense_mask, rounded_to: Optional[torch.dtype] = None):
    """Naive dense masked attention in q's dtype; a fully masked row gives 0. With ``rounded_to``
    (float16 or bfloat16), the naive computation in that dtype: float32 inputs, every intermediate
    (scores, scaled scores, probabilities, output) rounded to it, and through the casts' gradients
    the backward's too."""
    r = (lambda t: t.to(rounded_to).float()) if rounded_to is not None else (lambda t: t)  # noqa: E731
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = r(r(q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5)
    scores = scores.masked_fill(~dense_mask, float("-inf"))
    probs = r(torch.softmax(scores, dim=-1).nan_to_num(0.0))
    return r(probs @ v)


def _dense_mask(case: Case, masks) -> torch.Tensor:
    if isinstance(masks, Mask):
        return masks.to_dense().expand(case.heads, case.seqlen_q, case.seqlen_k).unsqueeze(0)
    return torch.stack([m.to_dense() for m in masks]).unsqueeze(0)


def _run(fn, q, k, v, masks, d_out, dtype, grads_in=None):
    """fn forward and backward on copies of q, k, v in dtype; the gradients rounded to grads_in
    when given (the naive 16-bit computation's float32 leaves)."""
    qq, kk, vv = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    out = fn(qq, kk, vv, masks)
    out.backward(d_out.to(dtype))
    grads = [x.grad if grads_in is None else x.grad.to(grads_in) for x in (qq, kk, vv)]
    return [t.detach().double() for t in [out] + grads]


def run_case(fn: Callable, case: Case, seed: int = 0, dtype: torch.dtype = torch.float32) -> Result:
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"conformance: dtype must be torch.float32, float16 or bfloat16, got {dtype}")
    generator = torch.Generator().manual_seed(seed)
    shape_q = (case.batch, case.heads, case.seqlen_q, case.head_dim)
    shape_kv = (case.batch, case.kv_heads, case.seqlen_k, case.head_dim)
    # The values a dtype tensor holds, as float32: every side computes on the same inputs.
    q, k, v, d_out = (torch.randn(s, generator=generator).to(dtype).float()
                      for s in (shape_q, shape_kv, shape_kv, shape_q))
    masks = case.masks()
    dense = _dense_mask(case, masks)
    rounded_to = None if dtype == torch.float32 else dtype
    naive_fn = lambda a, b, c, m: naive_attention(a, b, c, dense, rounded_to)  # noqa: E731
    exact_fn = lambda a, b, c, m: attention(a, b, c, m, algorithm="reference")  # noqa: E731
    exact = _run(exact_fn, q, k, v, masks, d_out, torch.float64)
    naive = _run(naive_fn, q, k, v, masks, d_out, torch.float32, grads_in=rounded_to)
    naive_errors = tuple((a - b).abs().max().item() if a.numel() else 0.0 for a, b in zip(naive, exact))
    try:
        tested = _run(fn, q, k, v, masks, d_out, dtype)
    except Exception as error:  # a crash is a failure of the case, reported with its message
        return Result(case, (float("nan"),) * 4, naive_errors, False, f"raised {type(error).__name__}: {error}")
    errors = []
    failure = None
    for name, a, b, naive_error in zip(("o", "dq", "dk", "dv"), tested, exact, naive_errors):
        if a.shape != b.shape:
            return Result(case, (float("nan"),) * 4, naive_errors, False, f"{name} has shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        error = (a - b).abs().max().item() if a.numel() else 0.0
        errors.append(error)
        if failure is None and not within_tolerance(error, naive_error, b.abs().max().item() if b.numel() else 0.0):
            failure = f"{name} error {error:.3g} > 2 x naive {naive_error:.3g}"
    return Result(case, tuple(errors), naive_errors, failure is None, failure)


def conformance(fn: Callable, cases: Optional[Sequence[Case]] = None, seed: int = 0,
                dtype: torch.dtype = torch.float32) -> List[Result]:
    """Runs ``fn(q, k, v, mask)`` (mask: a spattn.torch.Mask or a list of one per head) on tensors
    of ``dtype`` (float32, float16 or bfloat16) over the cases (default_cases()) and returns one
    Result per case."""
    return [run_case(fn, case, seed, dtype) for case in (default_cases() if cases is None else cases)]


def format_table(results: Sequence[Result]) -> str:
    lines = [f"{'case':<32} {'o':>9} {'dq':>9} {'dk':>9} {'dv':>9}  result"]
    for r in results:
        errors = " ".join(f"{e:9.2e}" for e in r.errors)
        lines.append(f"{r.case.name:<32} {errors}  {'pass' if r.passed else 'FAIL: ' + (r.failure or '')}")
    passed = sum(r.passed for r in results)
    lines.append(f"{passed} passed, {len(results) - passed} failed")
    return "\n".join(lines)
