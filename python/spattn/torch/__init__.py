"""spattn for PyTorch: exact sparse attention with autograd.

    import spattn.torch as st
    mask = st.Mask.from_spec("sliding_window:w=128", seqlen, seqlen)   # build once, reuse
    out = st.attention(q, k, v, mask)                                   # (batch, heads, seqlen, dim)
    out.sum().backward()

q is (batch, heads, seqlen_q, head_dim); k and v are (batch, kv_heads, seqlen_k, head_dim[_v]), with
heads a multiple of kv_heads (grouped-query attention); any strides. ``mask`` is one Mask for every
head, a list of one Mask per query head, or None (every pair attends). On the CPU, float32,
float16 and bfloat16 run spattn's schedules (flash, small_cache, or auto's choice; 16-bit tensors
are converted to float32 tile by tile as they are loaded, and the output and gradients are rounded
once, into the input's dtype) and float64 runs the fp64 reference (``algorithm="reference"``),
which is what ``torch.autograd.gradcheck`` differentiates. On CUDA (where spattn's CUDA backend is
built), float32, float16 and bfloat16 run spattn's CUDA kernels. Under ``torch.autocast`` the
wrapper casts q, k and v to the autocast dtype of their device, as torch's lower-precision ops
(matmul, linear) do, and the op runs in that dtype. A fully masked row has output 0, LSE -inf
and contributes no gradient.

With torch >= 2.4 the ops have fake kernels and registered autograd, so ``torch.compile`` traces
``attention`` whole (``fullgraph=True``); build the masks outside the compiled function.

For attention split over key parts (context parallelism), ``Mask.select`` gives a part's mask and
``merge_partials`` combines the parts' outputs into attention over all keys;
``spattn.torch.distributed.attention`` runs it over torch.distributed ranks.
"""

import json
import math
from typing import List, Optional, Sequence, Tuple, Union

import torch

from .. import _compile
from .._ops import ops
from .mask import Mask, _translate

__all__ = ["Mask", "attention", "merge_partials", "plan"]

_ALGORITHMS = ("auto", "flash", "small_cache", "reference")
_OBJECTIVES = ("time", "words")


MaskArg = Union[None, Mask, Sequence[Mask]]


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: MaskArg = None,
    *,
    scale: Optional[float] = None,
    return_lse: bool = False,
    algorithm: str = "auto",
    cache_words: int = 0,
    objective: str = "time",
    threads: Optional[int] = None,
    io: bool = False,
    line_words: int = 0,
):
    """Attention over ``mask``, differentiable in q, k and v.

    Returns the output (batch, heads, seqlen_q, head_dim_v); with ``return_lse`` also the row
    logsumexp (batch, heads, seqlen_q), float32, natural log, -inf on a fully masked row (not
    differentiable). With ``io`` a dict is appended: the plan that ran and the counted words per
    operand (``predicted_reads`` == ``counted_reads``; CPU only). ``cache_words`` is the fast
    memory M of the CPU schedules (0: spattn's default; on CUDA it must be 0), ``objective`` what
    the CPU plan minimizes ("time" or "words"), ``threads`` the CPU worker threads (0 to 4096; 0 or
    None: torch.get_num_threads()). ``line_words`` is the line size L of the CPU I/O model in words, a
    power of two: 1 is the paper's word model, 0 (the default) a 64-byte line of the tensors'
    elements (16 float32, 32 float16 or bfloat16); the tiles, auto's choice and the counts of ``io``
    follow it (on CUDA it must be 0).
    """
    where = "spattn.torch.attention"
    q, k, v = _autocast(q, k, v)
    masks, call = _check_call(where, q, k, v, mask, scale, algorithm, cache_words, objective, line_words)
    if io and q.device.type != "cpu":
        raise ValueError(f"{where}: io=True counts the CPU schedules; q is on {q.device}")
    workers = _check_threads(threads)
    report = {}
    if _compile.AVAILABLE and not io:
        settings = ([m._key for m in masks], scale, algorithm, int(cache_words), int(line_words), objective, workers)
        if _compile.is_compiling():
            out, lse = ops.forward(q, k, v, *settings)
        else:
            out, lse = _translate(lambda: ops.forward(q, k, v, *settings))
    else:
        out, lse = _Attention.apply(q, k, v, masks, scale, algorithm, int(cache_words), int(line_words), objective,
                                    workers, io, report)
    result = (out, lse) if return_lse else (out,)
    if io:
        result = result + (report,)
    return result[0] if len(result) == 1 else result


def plan(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: MaskArg = None,
    *,
    pass_: str = "forward",
    algorithm: str = "auto",
    cache_words: int = 0,
    objective: str = "time",
    line_words: int = 0,
) -> dict:
    """The plan ``attention`` with the same arguments runs for ``pass_`` ("forward" or
    "backward"), without running it: the algorithm, the tiles, the predicted words and lines (of
    ``line_words`` words; 0: a 64-byte line of q's dtype), the bound."""
    q, k, v = _autocast(q, k, v)
    masks, call = _check_call("spattn.torch.plan", q, k, v, mask, None, algorithm, cache_words, objective, line_words)
    if pass_ not in ("forward", "backward"):
        raise ValueError(f"spattn.torch.plan: pass_ must be 'forward' or 'backward', got {pass_!r}")
    if algorithm == "reference":
        raise ValueError("spattn.torch.plan: the reference is not a schedule and has no plan")
    keys = [m._key for m in masks]
    dtype = str(q.dtype).replace("torch.", "")
    return json.loads(_translate(lambda: ops.plan(call, keys, pass_, algorithm, int(cache_words), int(line_words),
                                                  objective, dtype)))


class _Attention(torch.autograd.Function):
    """The autograd of torch < 2.4, and of io=True (whose forward also returns the ledger)."""

    @staticmethod
    def forward(ctx, q, k, v, masks, scale, algorithm, cache_words, line_words, objective, threads, io, report):
        settings = ([m._key for m in masks], scale, algorithm, cache_words, line_words, objective, threads)
        if io:
            out, lse, text = _translate(lambda: ops.forward_counted(q, k, v, *settings))
            report.update(json.loads(text))
        else:
            out, lse = _translate(lambda: ops.forward(q, k, v, *settings))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.masks = masks  # the keys in settings name these masks: keep them alive until backward
        ctx.settings = settings
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        if d_out is None:
            return (None,) * 12
        dq, dk, dv = _translate(lambda: ops.backward(q, k, v, out, lse, d_out.to(q.dtype), *ctx.settings))
        return (dq, dk, dv) + (None,) * 9


_MAX_THREADS = int(ops.max_threads())  # spattn::kMaxThreads (include/spattn/attention.hpp)


def _check_threads(threads) -> int:
    """The rule of the C++ side (AttentionOptions::threads, spattn::kMaxThreads, read from the
    library): 0 to that limit, where 0 (and None) is torch's intra-op thread count."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= _MAX_THREADS:
        raise ValueError(f"spattn.torch.attention: threads = {threads!r} must be an int in [0, {_MAX_THREADS}] "
                         "(0 or None: torch's intra-op thread count)")
    return threads


def _autocast(q, k, v):
    """q, k and v in the autocast dtype of their device when autocast is on there (floating-point
    tensors only, as torch's autocast casts), else as given."""
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return q, k, v  # _check_call names the argument
    device = q.device.type
    if device == "cpu" and torch.is_autocast_cpu_enabled():
        dtype = torch.get_autocast_cpu_dtype()
    elif device == "cuda" and torch.is_autocast_enabled():
        dtype = torch.get_autocast_gpu_dtype()
    else:
        return q, k, v
    return tuple(t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t for t in (q, k, v))


def _check_call(where, q, k, v, mask, scale, algorithm, cache_words, objective,
                line_words=0) -> Tuple[List[Mask], List[int]]:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{where}: {name} has {t.dim()} dimensions {tuple(t.shape)}, expected 4 (batch, heads, seqlen, dim)")
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            raise ValueError(f"{where}: {name} is on {t.device}, q on {q.device}")
    if algorithm not in _ALGORITHMS:
        raise ValueError(f"{where}: algorithm must be one of {', '.join(_ALGORITHMS)}, got {algorithm!r}")
    if q.device.type == "cpu":
        if q.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            raise TypeError(f"{where}: q has dtype {q.dtype}; on the CPU spattn runs float32, float16 and bfloat16 "
                            "(and float64 with algorithm='reference')")
        if q.dtype == torch.float64 and algorithm != "reference":
            raise TypeError(f"{where}: float64 runs only with algorithm='reference' (the fp64 oracle), got {algorithm!r}")
    elif q.device.type == "cuda":
        if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"{where}: q has dtype {q.dtype}; on CUDA spattn runs float32, float16 and bfloat16")
        if algorithm == "reference":
            raise ValueError(f"{where}: the fp64 reference runs on the CPU; q is on {q.device}")
        if cache_words != 0:
            raise ValueError(f"{where}: cache_words = {cache_words!r} sizes the CPU schedules' fast memory; "
                             "on CUDA it must be 0")
        if line_words != 0:
            raise ValueError(f"{where}: line_words = {line_words!r} is the CPU planner's line model; on CUDA it must be 0")
    else:
        raise ValueError(f"{where}: q is on {q.device}; spattn runs on the CPU and on CUDA")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"{where}: {name} has dtype {t.dtype}, q has {q.dtype}")
    if objective not in _OBJECTIVES:
        raise ValueError(f"{where}: objective must be one of {', '.join(_OBJECTIVES)}, got {objective!r}")
    if isinstance(cache_words, bool) or not isinstance(cache_words, int) or cache_words < 0:
        raise ValueError(f"{where}: cache_words must be a non-negative int (0: the default), got {cache_words!r}")
    if (isinstance(line_words, bool) or not isinstance(line_words, int) or line_words < 0 or line_words > 1024
            or line_words & (line_words - 1)):
        raise ValueError(f"{where}: line_words must be 0 (the default, a 64-byte line) or a power of two from 1 to 1024, "
                         f"got {line_words!r}")
    if scale is not None and (not isinstance(scale, (int, float)) or not math.isfinite(scale)):
        raise ValueError(f"{where}: scale must be a finite number or None, got {scale!r}")
    batch, heads, seqlen_q, head_dim = q.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(f"{where}: batch differs: q {batch}, k {k.shape[0]}, v {v.shape[0]}")
    kv_heads, seqlen_k = k.shape[1], k.shape[2]
    if k.shape[3] != head_dim:
        raise ValueError(f"{where}: k has head_dim {k.shape[3]}, q has {head_dim}")
    if v.shape[1] != kv_heads or v.shape[2] != seqlen_k:
        raise ValueError(f"{where}: v has {v.shape[1]} heads and seqlen {v.shape[2]}, k has {kv_heads} and {seqlen_k}")
    if (kv_heads == 0 and heads != 0) or (kv_heads > 0 and heads % kv_heads != 0):
        raise ValueError(f"{where}: q has {heads} heads, not a multiple of k's {kv_heads} heads")
    masks = _masks_of(where, mask, heads, seqlen_q, seqlen_k)
    return masks, [batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, v.shape[3]]


def _masks_of(where, mask, heads, seqlen_q, seqlen_k) -> List[Mask]:
    if mask is None:
        return [Mask.full(seqlen_q, seqlen_k)]
    per_head = not isinstance(mask, Mask)
    if per_head and not isinstance(mask, (list, tuple)):
        raise TypeError(f"{where}: mask must be a spattn.torch.Mask, a list of one per query head, or None; got {type(mask).__name__}")
    masks = list(mask) if per_head else [mask]
    if per_head and len(masks) != heads:
        raise ValueError(f"{where}: mask has {len(masks)} masks, q has {heads} heads (one mask per query head)")
    for index, m in enumerate(masks):
        name = f"mask[{index}]" if per_head else "mask"
        if not isinstance(m, Mask):
            raise TypeError(f"{where}: {name} must be a spattn.torch.Mask, got {type(m).__name__}")
        if m.shape != (seqlen_q, seqlen_k):
            raise ValueError(f"{where}: {name} is {m.shape[0]} x {m.shape[1]}, but q has seqlen {seqlen_q} and k has seqlen {seqlen_k}")
    return masks


# After the helpers it uses: the merge of key parts (partials.py).
from .partials import merge_partials  # noqa: E402


def __getattr__(name):
    """``spattn.torch.distributed`` after ``import spattn.torch``, as ``torch.distributed`` after
    ``import torch``: imported on first use, so that importing spattn.torch never starts
    torch.distributed."""
    if name == "distributed":
        import importlib

        return importlib.import_module(f"{__name__}.distributed")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
