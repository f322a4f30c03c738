"""spattn.torch.Mask: a prepared attention mask, held in its compact form (docs/python.md, "Masks").

Built once and passed to every layer and call; the constructors validate and refuse bad input with
a ValueError or TypeError naming the argument and the value.
"""

import numbers
from collections.abc import Sequence as _SequenceABC
from typing import List, Optional, Sequence, Tuple, Union

import torch

from .._ops import MaskClass


def _translate(call):
    """spattn's C++ errors reach Python as RuntimeError; bad input is a ValueError."""
    try:
        return call()
    except RuntimeError as error:
        raise ValueError(str(error).split("\nException raised from")[0]) from None


def _check_length(where: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name} must be a non-negative int, got {value!r}")


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
