"""spattn for PyTorch: exact sparse attention with autograd.

    import spattn.torch as st
    mask = st.Mask.from_spec("sliding_window:w=128", seqlen, seqlen)   # build once, reuse
    out = st.attention(q, k, v, mask)                                   # (batch, heads, seqlen, dim)
    out.sum().backward()

q is (batch, heads, seqlen_q, head_dim); k and v are (batch, kv_heads, seqlen_k, head_dim[_v]), with
heads a multiple of kv_heads (grouped-query attention); any strides. ``mask`` is one Mask for every
head, a list of one Mask per query head, or None (every pair attends). On the CPU, float32 runs
spattn's schedules (flash, small_cache, or auto's choice) and float64 runs the fp64 reference
(``algorithm="reference"``), which is what ``torch.autograd.gradcheck`` differentiates. On CUDA
(where spattn's CUDA backend is built), float32, float16 and bfloat16 run spattn's CUDA kernels.
A fully masked row has output 0, LSE -inf and contributes no gradient.

With torch >= 2.4 the ops have fake kernels and registered autograd, so ``torch.compile`` traces
``attention`` whole (``fullgraph=True``); build the masks outside the compiled function.

For attention split over key parts (context parallelism), ``Mask.select`` gives a part's mask and
``merge_partials`` combines the parts' outputs into attention over all keys.
"""

import json
import math
import numbers
from collections.abc import Sequence as _SequenceABC
from typing import List, Optional, Sequence, Tuple, Union

import torch

from .. import _compile
from .._ops import MaskClass, ops

__all__ = ["Mask", "attention", "merge_partials", "plan"]

_ALGORITHMS = ("auto", "flash", "small_cache", "reference")
_OBJECTIVES = ("time", "words")


class Mask:
    """A prepared attention mask: the (query, key) pairs that attend, in its most compact exact form
    (``form``): "full", "intervals" (per query row a few [begin, end) key ranges: causal, windows,
    documents, prefix-LM, block patterns), "blocks" (block-sparse: stored blocks, full or partial
    with their pairs as bits: FlexAttention BlockMasks, per-step block selections) or "elements"
    (every pair, CSR).

    Build it once and pass it to every layer and call: what the planner and the schedules need is
    built inside on first use and kept. Generated patterns take no seqlen_q x seqlen_k memory.
    """

    def __init__(self, handle):
        if not isinstance(handle, torch.ScriptObject):
            raise TypeError(
                "Mask: build masks with Mask.from_spec, from_intervals, from_cu_seqlens, from_document_ids, "
                "from_block_indices, from_blocks, from_block_mask, from_dense, from_csr, from_sparse or full"
            )
        self._handle = handle
        self._key = handle.key()  # what the ops take; valid while this Mask lives

    @staticmethod
    def from_spec(spec: str, seqlen_q: int, seqlen_k: int) -> "Mask":
        """Any PATTERN-SPEC ("causal", "sliding_window:w=128", "bigbird:block=64,...", compositions)."""
        if not isinstance(spec, str):
            raise TypeError(f"Mask.from_spec: spec must be a str, got {type(spec).__name__}")
        _check_length("Mask.from_spec", "seqlen_q", seqlen_q)
        _check_length("Mask.from_spec", "seqlen_k", seqlen_k)
        return Mask(_translate(lambda: MaskClass.from_spec(spec, int(seqlen_q), int(seqlen_k))))

    @staticmethod
    def full(seqlen_q: int, seqlen_k: int) -> "Mask":
        _check_length("Mask.full", "seqlen_q", seqlen_q)
        _check_length("Mask.full", "seqlen_k", seqlen_k)
        return Mask(MaskClass.full(int(seqlen_q), int(seqlen_k)))

    @staticmethod
    def from_csr(crow_indices: torch.Tensor, col_indices: torch.Tensor, shape: Sequence[int]) -> "Mask":
        """CSR structure (integer tensors); columns sorted and unique within a row."""
        if len(shape) != 2:
            raise ValueError(f"Mask.from_csr: shape must be (seqlen_q, seqlen_k), got {tuple(shape)}")
        for name, t in (("crow_indices", crow_indices), ("col_indices", col_indices)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"Mask.from_csr: {name} must be a tensor, got {type(t).__name__}")
        seqlen_q, seqlen_k = (int(x) for x in shape)
        _check_length("Mask.from_csr", "shape[0]", seqlen_q)
        _check_length("Mask.from_csr", "shape[1]", seqlen_k)
        return Mask(_translate(lambda: MaskClass.from_csr(crow_indices.cpu(), col_indices.cpu(), seqlen_q, seqlen_k)))

    @staticmethod
    def from_intervals(row_ptr: torch.Tensor, begin: torch.Tensor, end: torch.Tensor, shape: Sequence[int]) -> "Mask":
        """Interval structure (integer tensors): query row i attends the keys [begin[k], end[k]) for k
        in [row_ptr[i], row_ptr[i + 1]); intervals non-empty, ascending, not overlapping."""
        if len(shape) != 2:
            raise ValueError(f"Mask.from_intervals: shape must be (seqlen_q, seqlen_k), got {tuple(shape)}")
        for name, t in (("row_ptr", row_ptr), ("begin", begin), ("end", end)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"Mask.from_intervals: {name} must be a tensor, got {type(t).__name__}")
        seqlen_q, seqlen_k = (int(x) for x in shape)
        _check_length("Mask.from_intervals", "shape[0]", seqlen_q)
        _check_length("Mask.from_intervals", "shape[1]", seqlen_k)
        return Mask(_translate(lambda: MaskClass.from_intervals(row_ptr.cpu(), begin.cpu(), end.cpu(), seqlen_q, seqlen_k)))

    @staticmethod
    def from_blocks(block_row_ptr: torch.Tensor, block_col_idx: torch.Tensor, partial: torch.Tensor, bits: torch.Tensor,
                    block_size: Sequence[int], shape: Sequence[int]) -> "Mask":
        """Block structure at block_size (block_q, block_k): block row i stores the key blocks
        block_col_idx[block_row_ptr[i]:block_row_ptr[i + 1]] (ascending); ``partial`` (bool, one
        per stored block) marks the blocks only some of whose pairs attend, and ``bits`` (bool,
        (partial blocks, block_q, block_k), in order) holds those pairs (False past the edges). A
        partial block sets at least one in-range pair and not all of them."""
        if len(shape) != 2 or len(block_size) != 2:
            raise ValueError(f"Mask.from_blocks: shape and block_size must be pairs, got {tuple(shape)} and {tuple(block_size)}")
        for name, t in (("block_row_ptr", block_row_ptr), ("block_col_idx", block_col_idx), ("partial", partial), ("bits", bits)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"Mask.from_blocks: {name} must be a tensor, got {type(t).__name__}")
        seqlen_q, seqlen_k = (int(x) for x in shape)
        _check_length("Mask.from_blocks", "shape[0]", seqlen_q)
        _check_length("Mask.from_blocks", "shape[1]", seqlen_k)
        block_q, block_k = (int(x) for x in block_size)
        return Mask(_translate(lambda: MaskClass.from_blocks(block_row_ptr.cpu(), block_col_idx.cpu(), partial.cpu(), bits.cpu(),
                                                             block_q, block_k, seqlen_q, seqlen_k)))

    @staticmethod
    def from_block_indices(indices: torch.Tensor, counts: torch.Tensor, block_q: int, block_k: int, seqlen_q: int,
                           seqlen_k: int) -> Union["Mask", List["Mask"]]:
        """A block selection a model computes (top-k key blocks per query block, as in MoBA or
        NSA): query block i attends the key blocks ``indices[..., i, :counts[..., i]]`` whole, in
        any order, without repeats. ``indices`` is (query blocks, width) with ``counts``
        (query blocks,): one Mask; or (heads, query blocks, width) with (heads, query blocks): one
        Mask per head. query blocks = ceil(seqlen_q / block_q). Built in block form, O(selected
        blocks) per head: cheap enough to rebuild every step."""
        for name, t in (("indices", indices), ("counts", counts)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"Mask.from_block_indices: {name} must be a tensor, got {type(t).__name__}")
        _check_length("Mask.from_block_indices", "seqlen_q", seqlen_q)
        _check_length("Mask.from_block_indices", "seqlen_k", seqlen_k)
        if indices.dim() not in (2, 3) or counts.dim() != indices.dim() - 1 or counts.shape != indices.shape[:-1]:
            raise ValueError(f"Mask.from_block_indices: indices has shape {tuple(indices.shape)} and counts {tuple(counts.shape)}; "
                             "expected (query blocks, width) and (query blocks,), or (heads, query blocks, width) and (heads, query blocks)")
        indices, counts = indices.detach().cpu(), counts.detach().cpu()

        def one(head_indices, head_counts):
            return Mask(_translate(lambda: MaskClass.from_block_indices(head_indices, head_counts, int(block_q), int(block_k),
                                                                        int(seqlen_q), int(seqlen_k))))

        if indices.dim() == 2:
            return one(indices, counts)
        return [one(indices[h], counts[h]) for h in range(indices.shape[0])]

    @staticmethod
    def from_cu_seqlens(cu_seqlens_q: torch.Tensor, cu_seqlens_k: Optional[torch.Tensor] = None, causal: bool = False) -> "Mask":
        """Packed documents as FlashAttention's varlen holds them: document d has the queries
        [cu_seqlens_q[d], cu_seqlens_q[d + 1]) and the keys of cu_seqlens_k (default: the same);
        ``causal`` is bottom-right aligned within each document. O(tokens) memory."""
        from ..documents import check_flag, from_cu_seqlens

        check_flag("Mask.from_cu_seqlens", causal)
        row_ptr, begin, end, seqlen_q, seqlen_k = from_cu_seqlens(cu_seqlens_q, cu_seqlens_k, causal)
        return Mask.from_intervals(row_ptr, begin, end, (seqlen_q, seqlen_k))

    @staticmethod
    def from_document_ids(ids_q: torch.Tensor, ids_k: Optional[torch.Tensor] = None, causal: bool = False) -> "Mask":
        """Query i attends key j when ids_q[i] == ids_k[j] (ids_k defaults to ids_q), and with
        ``causal`` also j <= i + (seqlen_k - seqlen_q): FlexAttention's document mask. O(tokens)."""
        from ..documents import check_flag, from_document_ids

        check_flag("Mask.from_document_ids", causal)
        row_ptr, begin, end, seqlen_q, seqlen_k = from_document_ids(ids_q, ids_k, causal)
        return Mask.from_intervals(row_ptr, begin, end, (seqlen_q, seqlen_k))

    @staticmethod
    def from_dense(mask: torch.Tensor) -> "Mask":
        """A (seqlen_q, seqlen_k) bool tensor: True where the pair attends."""
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
            described = f"{mask.dtype} tensor of {mask.dim()} dimensions" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(f"Mask.from_dense: mask must be a 2-D bool tensor, got a {described}")
        dense = mask.cpu()
        counts = dense.sum(dim=1, dtype=torch.int64)
        crow = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
        return Mask.from_csr(crow, dense.nonzero()[:, 1], tuple(dense.shape))

    @staticmethod
    def from_sparse(mask: torch.Tensor) -> "Mask":
        """A torch sparse CSR or BSR tensor of shape (seqlen_q, seqlen_k): its stored entries attend
        (a BSR block attends whole; stored zeros attend too: the structure is the mask)."""
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"Mask.from_sparse: mask must be a tensor, got {type(mask).__name__}")
        if mask.layout == torch.sparse_bsr:
            rows, cols = mask.values().shape[1:3]
            block = torch.ones(mask.values().shape[0], rows, cols, dtype=torch.bool)
            dense = torch.sparse_bsr_tensor(mask.crow_indices(), mask.col_indices(), block, mask.shape).to_dense()
            return Mask.from_dense(dense)
        if mask.layout != torch.sparse_csr:
            raise TypeError(f"Mask.from_sparse: mask must be a sparse CSR or BSR tensor, got layout {mask.layout}")
        if mask.dim() != 2:
            raise ValueError(f"Mask.from_sparse: mask has {mask.dim()} dimensions, expected 2")
        return Mask.from_csr(mask.crow_indices(), mask.col_indices(), tuple(mask.shape))

    @staticmethod
    def from_block_mask(block_mask, batch: int = 0) -> Union["Mask", List["Mask"]]:
        """A FlexAttention BlockMask, exactly (its full blocks whole, its partial blocks where its
        mask_mod holds): one Mask per head, or a single Mask when it has one head (spattn masks are
        shared over the batch: ``batch`` picks the BlockMask's batch entry)."""
        from ..block_mask import masks_from_block_mask

        masks = masks_from_block_mask(block_mask, batch)
        return masks[0] if len(masks) == 1 else masks

    @property
    def shape(self) -> Tuple[int, int]:
        return (self._handle.seqlen_q(), self._handle.seqlen_k())

    @property
    def nnz(self) -> int:
        """The attended pairs (Z_QK)."""
        return self._handle.nnz()

    @property
    def form(self) -> str:
        """"full", "intervals", "blocks" or "elements": the form the mask lives in."""
        return self._handle.form()

    def memory_bytes(self) -> int:
        """The bytes of the arrays the mask holds (its form's, plus a CSR copy once crow_indices or
        col_indices asked for one); the schedules' cached structures are not counted."""
        return self._handle.memory_bytes()

    def intervals(self) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(row_ptr, begin, end) of the interval form (copies), or None in another form."""
        parts = self._handle.intervals()
        return tuple(parts) if parts else None

    def blocks(self) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Tuple[int, int]]]:
        """(block_row_ptr, block_col_idx, partial, bits, block_size) of the block form (copies; the
        arguments of from_blocks), or None in another form."""
        parts = self._handle.blocks()
        if not parts:
            return None
        block_size, row_ptr, cols, partial, bits = parts
        return (row_ptr, cols, partial, bits, tuple(int(x) for x in block_size))

    def select(self, rows: Sequence[Tuple[int, int]], cols: Sequence[Tuple[int, int]]) -> "Mask":
        """The mask restricted to some query positions and key positions.

        ``rows`` and ``cols`` are sequences of (begin, end) int pairs, each the positions
        [begin, end). The result has the concatenation of the row ranges (in the order given) as
        its rows and that of the col ranges as its columns; its pair (i, j) attends iff the global
        pair does. Ranges must satisfy 0 <= begin <= end <= seqlen and those of one side must not
        overlap (empty ranges are allowed); a full mask stays full. ``mask.select([(0, n_q)],
        [(b, e)])`` is the mask of the keys [b, e) for every query: attention over it with
        ``k[:, :, b:e]`` and ``v[:, :, b:e]`` is one key part, which ``merge_partials`` combines.
        A wrong type is a TypeError, a bad range a ValueError naming Mask.select and the argument.
        """
        row_pairs = _range_pairs("rows", rows)
        col_pairs = _range_pairs("cols", cols)
        return Mask(_translate(lambda: self._handle.select(row_pairs, col_pairs)))

    def crow_indices(self) -> torch.Tensor:
        return self._handle.crow_indices()

    def col_indices(self) -> torch.Tensor:
        return self._handle.col_indices()

    def to_dense(self) -> torch.Tensor:
        """The mask as a (seqlen_q, seqlen_k) bool tensor (for tests: it takes n^2 memory)."""
        seqlen_q, seqlen_k = self.shape
        crow = self.crow_indices()
        rows = torch.repeat_interleave(torch.arange(seqlen_q), crow[1:] - crow[:-1])
        dense = torch.zeros(seqlen_q, seqlen_k, dtype=torch.bool)
        dense[rows, self.col_indices()] = True
        return dense

    # A Mask is immutable: copies share it (a deep copy of a model keeps its masks), and pickling
    # stores its structure, rebuilt (and validated) on load.
    def __copy__(self) -> "Mask":
        return self

    def __deepcopy__(self, memo) -> "Mask":
        return self

    def __reduce__(self):
        if self.form == "full":
            return (Mask.full, self.shape)
        parts = self.intervals()
        if parts is not None:
            return (Mask.from_intervals, (*parts, self.shape))
        blocks = self.blocks()
        if blocks is not None:
            return (Mask.from_blocks, (*blocks, self.shape))
        return (Mask.from_csr, (self.crow_indices(), self.col_indices(), self.shape))

    def __repr__(self) -> str:
        seqlen_q, seqlen_k = self.shape
        return f"spattn.torch.Mask({seqlen_q} x {seqlen_k}, nnz={self.nnz}, form={self.form})"


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
):
    """Attention over ``mask``, differentiable in q, k and v.

    Returns the output (batch, heads, seqlen_q, head_dim_v); with ``return_lse`` also the row
    logsumexp (batch, heads, seqlen_q), float32, natural log, -inf on a fully masked row (not
    differentiable). With ``io`` a dict is appended: the plan that ran and the counted words per
    operand (``predicted_reads`` == ``counted_reads``; CPU only). ``cache_words`` is the fast
    memory M of the CPU schedules (0: spattn's default; on CUDA it must be 0), ``objective`` what
    the CPU plan minimizes ("time" or "words"), ``threads`` the CPU worker threads (None:
    torch.get_num_threads()).
    """
    where = "spattn.torch.attention"
    masks, call = _check_call(where, q, k, v, mask, scale, algorithm, cache_words, objective)
    if io and q.device.type != "cpu":
        raise ValueError(f"{where}: io=True counts the CPU schedules; q is on {q.device}")
    workers = _check_threads(threads)
    report = {}
    if _compile.AVAILABLE and not io:
        settings = ([m._key for m in masks], scale, algorithm, int(cache_words), objective, workers)
        if _compile.is_compiling():
            out, lse = ops.forward(q, k, v, *settings)
        else:
            out, lse = _translate(lambda: ops.forward(q, k, v, *settings))
    else:
        out, lse = _Attention.apply(q, k, v, masks, scale, algorithm, int(cache_words), objective, workers, io, report)
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
) -> dict:
    """The plan ``attention`` with the same arguments runs for ``pass_`` ("forward" or
    "backward"), without running it: the algorithm, the tiles, the predicted words, the bound."""
    masks, call = _check_call("spattn.torch.plan", q, k, v, mask, None, algorithm, cache_words, objective)
    if pass_ not in ("forward", "backward"):
        raise ValueError(f"spattn.torch.plan: pass_ must be 'forward' or 'backward', got {pass_!r}")
    if algorithm == "reference":
        raise ValueError("spattn.torch.plan: the reference is not a schedule and has no plan")
    keys = [m._key for m in masks]
    return json.loads(_translate(lambda: ops.plan(call, keys, pass_, algorithm, int(cache_words), objective)))


class _Attention(torch.autograd.Function):
    """The autograd of torch < 2.4, and of io=True (whose forward also returns the ledger)."""

    @staticmethod
    def forward(ctx, q, k, v, masks, scale, algorithm, cache_words, objective, threads, io, report):
        settings = ([m._key for m in masks], scale, algorithm, cache_words, objective, threads)
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
            return (None,) * 11
        dq, dk, dv = _translate(lambda: ops.backward(q, k, v, out, lse, d_out.to(q.dtype), *ctx.settings))
        return dq, dk, dv, None, None, None, None, None, None, None, None


def _translate(call):
    """spattn's C++ errors reach Python as RuntimeError; bad input is a ValueError."""
    try:
        return call()
    except RuntimeError as error:
        raise ValueError(str(error).split("\nException raised from")[0]) from None


def _range_pairs(name: str, ranges) -> torch.Tensor:
    """Mask.select's (begin, end) int pairs as the (count, 2) int64 tensor its op takes."""
    where = "Mask.select"
    if isinstance(ranges, (str, bytes)) or not isinstance(ranges, _SequenceABC):
        raise TypeError(f"{where}: {name} must be a sequence of (begin, end) int pairs, got {type(ranges).__name__}")
    pairs = []
    for index, pair in enumerate(ranges):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, _SequenceABC) or len(pair) != 2:
            raise TypeError(f"{where}: {name}[{index}] must be a (begin, end) pair of ints, got {pair!r}")
        for value in pair:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{where}: {name}[{index}] = {tuple(pair)!r} must hold ints, got {type(value).__name__}")
            if not -(2**63) <= int(value) < 2**63:
                raise ValueError(f"{where}: {name}[{index}] = {tuple(pair)!r} does not fit in int64")
        pairs.append((int(pair[0]), int(pair[1])))
    return torch.tensor(pairs, dtype=torch.int64).reshape(len(pairs), 2)


def _check_length(where: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name} must be a non-negative int, got {value!r}")


def _check_threads(threads) -> int:
    """0 (from None) lets the op use torch's intra-op thread count."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"spattn.torch.attention: threads must be a positive int or None, got {threads!r}")
    return threads


def _check_call(where, q, k, v, mask, scale, algorithm, cache_words, objective) -> Tuple[List[Mask], List[int]]:
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
        if q.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{where}: q has dtype {q.dtype}; on the CPU spattn runs torch.float32 "
                            "(and torch.float64 with algorithm='reference')")
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
    else:
        raise ValueError(f"{where}: q is on {q.device}; spattn runs on the CPU and on CUDA")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"{where}: {name} has dtype {t.dtype}, q has {q.dtype}")
    if objective not in _OBJECTIVES:
        raise ValueError(f"{where}: objective must be one of {', '.join(_OBJECTIVES)}, got {objective!r}")
    if isinstance(cache_words, bool) or not isinstance(cache_words, int) or cache_words < 0:
        raise ValueError(f"{where}: cache_words must be a non-negative int (0: the default), got {cache_words!r}")
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
