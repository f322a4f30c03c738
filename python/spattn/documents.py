"""Packed documents (varlen) -> interval masks, with torch ops over the tokens: no seqlen x seqlen grid.

Two ways users hold a packed batch:

* ``cu_seqlens`` (FlashAttention's varlen): document d holds queries [cu_q[d], cu_q[d + 1]) and keys
  [cu_k[d], cu_k[d + 1]); a query attends the keys of its own document. ``causal`` is bottom-right
  aligned within each document, as FlashAttention's varlen causal: local key b <= local query a +
  (len_k - len_q).
* document ids (FlexAttention's document masking): token t belongs to document ``ids[t]``; query i
  attends key j when ``ids_q[i] == ids_k[j]``. Documents need not be contiguous (a document's keys
  are then several intervals). ``causal`` adds j <= i + (seqlen_k - seqlen_q), the global
  bottom-right alignment of ``causal`` in pattern specs.

Each returns (row_ptr, begin, end, seqlen_q, seqlen_k) for ``Mask.from_intervals``, built in
O(tokens log tokens) torch ops: cheap next to the attention it feeds, every step.
"""

from typing import Optional, Tuple

import torch

Intervals = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int]


def _index_tensor(where: str, name: str, t) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a tensor, got {type(t).__name__}")
    if t.dim() != 1 or t.dtype in (torch.bool,) or t.is_floating_point() or t.is_complex():
        raise TypeError(f"{where}: {name} must be a 1-D integer tensor, got a {t.dtype} tensor of shape {tuple(t.shape)}")
    return t.detach().to("cpu", torch.int64)


def _check_offsets(where: str, name: str, cu: torch.Tensor) -> None:
    if cu.numel() < 1 or int(cu[0]) != 0:
        raise ValueError(f"{where}: {name} must start at 0, got {cu[:4].tolist()}")
    steps = cu[1:] - cu[:-1]
    if steps.numel() > 0 and bool((steps < 0).any()):
        d = int(torch.nonzero(steps < 0)[0])
        raise ValueError(f"{where}: {name} must not decrease: {name}[{d + 1}] = {int(cu[d + 1])} < {name}[{d}] = {int(cu[d])}")


def _pack(lo: torch.Tensor, hi: torch.Tensor, rows: torch.Tensor, seqlen_q: int, seqlen_k: int) -> Intervals:
    """Intervals [lo, hi) of the given rows (ascending rows, each row's intervals ascending): empty
    ones dropped, the row pointers counted."""
    keep = hi > lo
    counts = torch.bincount(rows[keep], minlength=seqlen_q) if seqlen_q > 0 else torch.zeros(0, dtype=torch.int64)
    row_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
    return row_ptr, lo[keep].contiguous(), hi[keep].contiguous(), seqlen_q, seqlen_k


def from_cu_seqlens(cu_q, cu_k=None, causal: bool = False) -> Intervals:
    where = "Mask.from_cu_seqlens"
    cu_q = _index_tensor(where, "cu_seqlens_q", cu_q)
    cu_k = cu_q if cu_k is None else _index_tensor(where, "cu_seqlens_k", cu_k)
    _check_offsets(where, "cu_seqlens_q", cu_q)
    _check_offsets(where, "cu_seqlens_k", cu_k)
    if cu_k.numel() != cu_q.numel():
        raise ValueError(f"{where}: cu_seqlens_q has {cu_q.numel() - 1} documents but cu_seqlens_k has {cu_k.numel() - 1}")
    seqlen_q, seqlen_k = int(cu_q[-1]), int(cu_k[-1])
    len_q, len_k = cu_q[1:] - cu_q[:-1], cu_k[1:] - cu_k[:-1]
    doc = torch.repeat_interleave(torch.arange(len_q.numel()), len_q)  # (seqlen_q): each query's document
    rows = torch.arange(seqlen_q)
    lo, hi = cu_k[doc], cu_k[doc + 1]
    if causal:
        local = rows - cu_q[doc]
        hi = torch.minimum(hi, lo + local + (len_k - len_q)[doc] + 1)
    return _pack(lo, hi, rows, seqlen_q, seqlen_k)


def from_document_ids(ids_q, ids_k=None, causal: bool = False) -> Intervals:
    where = "Mask.from_document_ids"
    ids_q = _index_tensor(where, "ids_q", ids_q)
    ids_k = ids_q if ids_k is None else _index_tensor(where, "ids_k", ids_k)
    seqlen_q, seqlen_k = ids_q.numel(), ids_k.numel()
    # The runs of equal ids among the keys, grouped by id (stable: each id's runs stay ascending).
    if seqlen_k > 0:
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), torch.nonzero(ids_k[1:] != ids_k[:-1]).flatten() + 1])
        ends = torch.cat([starts[1:], torch.tensor([seqlen_k])])
        run_id = ids_k[starts]
        order = torch.sort(run_id, stable=True).indices
        run_id, starts, ends = run_id[order], starts[order], ends[order]
    else:
        run_id = starts = ends = torch.zeros(0, dtype=torch.int64)
    # Each query's runs: those of its id, [first, last) in the grouped order.
    first = torch.searchsorted(run_id, ids_q, right=False)
    last = torch.searchsorted(run_id, ids_q, right=True)
    counts = last - first
    rows = torch.repeat_interleave(torch.arange(seqlen_q), counts)
    run = torch.repeat_interleave(first, counts) + (torch.arange(rows.numel()) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts))
    lo, hi = starts[run], ends[run]
    if causal:
        hi = torch.minimum(hi, rows + (seqlen_k - seqlen_q) + 1)
    return _pack(lo, hi, rows, seqlen_q, seqlen_k)


def check_flag(where: str, causal: Optional[bool]) -> bool:
    if not isinstance(causal, bool):
        raise TypeError(f"{where}: causal must be a bool, got {type(causal).__name__}")
    return causal
