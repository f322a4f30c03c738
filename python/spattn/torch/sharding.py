"""Which sequence positions each rank holds: the sharding of context parallelism.

A ``Sharding`` gives every rank a list of ranges of global positions; the rank's local tensors hold
those positions in that order (its ranges concatenated). ``balance`` builds one for a mask so that
the attended pairs, the work, are even over the ranks:

    sharding = balance(mask, world_size)              # positions of each rank, pairs, imbalance
    q_local = sharding.take(q, rank)                   # this rank's rows of a global tensor
    out = sharding.assemble([out_0, out_1, ...])       # the global tensor from every rank's shard
"""

import math
from typing import List, Sequence, Tuple

import torch

from . import Mask

__all__ = ["Sharding", "balance", "pairs_per_position"]

Range = Tuple[int, int]


class Sharding:
    """Positions [0, seqlen) split over ``world_size`` ranks: rank r holds ``ranges[r]``, a list of
    disjoint (begin, end) ranges in the order its local tensors store them. Every position belongs to
    exactly one rank; ranks may hold nothing."""

    def __init__(self, ranges: Sequence[Sequence[Range]], seqlen: int):
        if isinstance(seqlen, bool) or not isinstance(seqlen, int) or seqlen < 0:
            raise ValueError(f"Sharding: seqlen must be a non-negative int, got {seqlen!r}")
        if len(ranges) < 1:
            raise ValueError("Sharding: ranges must name at least one rank")
        self.seqlen = seqlen
        self.ranges: List[List[Range]] = []
        self.pairs = None      # attended pairs per rank and their max / mean, when built by balance()
        self.imbalance = None
        owner = torch.full((seqlen,), -1, dtype=torch.int64)
        for rank, rank_ranges in enumerate(ranges):
            kept = []
            for index, item in enumerate(rank_ranges):
                begin, end = _as_range(f"Sharding: ranges[{rank}][{index}]", item)
                if not 0 <= begin <= end <= seqlen:
                    raise ValueError(f"Sharding: ranges[{rank}][{index}] = ({begin}, {end}) is not within [0, {seqlen}]")
                taken = owner[begin:end]
                if bool((taken >= 0).any()):
                    other = int(taken[taken >= 0][0])
                    raise ValueError(f"Sharding: ranges[{rank}][{index}] = ({begin}, {end}) overlaps a range of rank {other}")
                taken.fill_(rank)
                if end > begin:
                    kept.append((begin, end))
            self.ranges.append(kept)
        if bool((owner < 0).any()):
            missing = int((owner < 0).nonzero()[0])
            raise ValueError(f"Sharding: position {missing} of {seqlen} belongs to no rank")

    @staticmethod
    def contiguous(seqlen: int, world_size: int) -> "Sharding":
        """Rank r holds one contiguous run; lengths differ by at most one (the first ranks longer)."""
        _check_world_size("Sharding.contiguous", world_size)
        bounds = _even_bounds(seqlen, world_size)
        return Sharding([[(bounds[r], bounds[r + 1])] for r in range(world_size)], seqlen)

    @property
    def world_size(self) -> int:
        return len(self.ranges)

    def length(self, rank: int) -> int:
        """Positions rank ``rank`` holds (its local seqlen)."""
        return sum(end - begin for begin, end in self.ranges[rank])

    def positions(self, rank: int) -> torch.Tensor:
        """The global positions of rank ``rank``'s local rows, in local order (int64)."""
        parts = [torch.arange(begin, end, dtype=torch.int64) for begin, end in self.ranges[rank]]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)

    @property
    def permutation(self) -> torch.Tensor:
        """Global positions in rank order: rank 0's local rows, then rank 1's, ..."""
        return torch.cat([self.positions(r) for r in range(self.world_size)])

    def owner(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """For every global position: the rank holding it and its local index there (int64)."""
        rank_of = torch.empty(self.seqlen, dtype=torch.int64)
        local_of = torch.empty(self.seqlen, dtype=torch.int64)
        for rank in range(self.world_size):
            at = self.positions(rank)
            rank_of[at] = rank
            local_of[at] = torch.arange(at.numel(), dtype=torch.int64)
        return rank_of, local_of

    def take(self, x: torch.Tensor, rank: int, dim: int = 2) -> torch.Tensor:
        """Rank ``rank``'s shard of a global tensor (positions along ``dim``), contiguous."""
        if x.shape[dim] != self.seqlen:
            raise ValueError(f"Sharding.take: x has {x.shape[dim]} positions along dim {dim}, the sharding {self.seqlen}")
        return x.index_select(dim, self.positions(rank).to(x.device)).contiguous()

    def assemble(self, shards: Sequence[torch.Tensor], dim: int = 2) -> torch.Tensor:
        """The global tensor from every rank's shard (the inverse of ``take``)."""
        if len(shards) != self.world_size:
            raise ValueError(f"Sharding.assemble: {len(shards)} shards for {self.world_size} ranks")
        for rank, shard in enumerate(shards):
            if shard.shape[dim] != self.length(rank):
                raise ValueError(f"Sharding.assemble: shard {rank} has {shard.shape[dim]} positions, the rank holds {self.length(rank)}")
        stacked = torch.cat(list(shards), dim=dim)
        result = torch.empty_like(stacked)
        result.index_copy_(dim, self.permutation.to(stacked.device), stacked)
        return result

    def __eq__(self, other) -> bool:
        return isinstance(other, Sharding) and self.seqlen == other.seqlen and self.ranges == other.ranges

    def __repr__(self) -> str:
        return f"Sharding(seqlen={self.seqlen}, ranges={self.ranges})"


def pairs_per_position(masks: Sequence[Mask]) -> torch.Tensor:
    """Attended pairs of every query position, summed over the masks (one per head, or one)."""
    total = None
    for mask in masks:
        seqlen_q, seqlen_k = mask.shape
        if mask._handle.is_full():  # no CSR: a full mask's rows are all seqlen_k long
            counts = torch.full((seqlen_q,), seqlen_k, dtype=torch.int64)
        else:
            crow = mask.crow_indices()
            counts = crow[1:] - crow[:-1]
        total = counts if total is None else total + counts
    return total


def balance(mask, world_size: int, *, strategy: str = "lpt", chunk: int = 0) -> "Sharding":
    """A sharding of a square mask's positions (queries and keys alike) over ``world_size`` ranks
    that evens out the attended pairs (the work of the forward and the backward).

    ``strategy``:
      - "contiguous": one run per rank, lengths within one (pairs unbalanced under causal masks).
      - "zigzag": 2 x world_size equal chunks, rank r taking chunks r and 2 world_size - 1 - r (the
        head-tail split that balances causal masks exactly up to rounding).
      - "lpt" (default): chunks of ``chunk`` positions (0: seqlen / (8 world_size), rounded up),
        assigned largest-pairs-first to the rank with the fewest pairs among those holding fewer
        than their share of chunks, so that positions (memory) stay even as well; each rank's chunks
        kept in position order. Within 4/3 of the best split of the same chunks (Graham's bound).

    The result's ``pairs`` (per rank) and ``imbalance`` (max / mean, 1.0 when even) report the work.
    """
    masks = [mask] if isinstance(mask, Mask) else list(mask)
    if not masks or not all(isinstance(m, Mask) for m in masks):
        raise TypeError("balance: mask must be a spattn.torch.Mask or a list of them (one per head)")
    seqlen_q, seqlen_k = masks[0].shape
    if seqlen_q != seqlen_k or any(m.shape != masks[0].shape for m in masks):
        raise ValueError(f"balance: the masks must be square and alike (queries and keys share the sharding), got "
                         f"{[m.shape for m in masks]}")
    _check_world_size("balance", world_size)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0:
        raise ValueError(f"balance: chunk must be a non-negative int (0: automatic), got {chunk!r}")
    pairs = pairs_per_position(masks)
    if strategy == "contiguous":
        sharding = Sharding.contiguous(seqlen_q, world_size)
    elif strategy == "zigzag":
        bounds = _even_bounds(seqlen_q, 2 * world_size)
        last = 2 * world_size - 1
        sharding = Sharding([[(bounds[r], bounds[r + 1]), (bounds[last - r], bounds[last - r + 1])]
                             for r in range(world_size)], seqlen_q)
    elif strategy == "lpt":
        sharding = _lpt(pairs, world_size, chunk or max(1, math.ceil(seqlen_q / (8 * world_size))))
    else:
        raise ValueError(f"balance: strategy must be 'contiguous', 'zigzag' or 'lpt', got {strategy!r}")
    sharding.pairs = [int(pairs[sharding.positions(r)].sum()) for r in range(world_size)]
    mean = sum(sharding.pairs) / world_size
    sharding.imbalance = max(sharding.pairs) / mean if mean > 0 else 1.0
    return sharding


def _lpt(pairs: torch.Tensor, world_size: int, chunk: int) -> Sharding:
    seqlen = pairs.numel()
    starts = list(range(0, seqlen, chunk))
    chunk_pairs = [int(pairs[s:s + chunk].sum()) for s in starts]
    capacity = math.ceil(len(starts) / world_size)
    load = [0] * world_size
    held: List[List[int]] = [[] for _ in range(world_size)]
    # Largest first; ties by position, so that the result is the same on every rank.
    for index in sorted(range(len(starts)), key=lambda i: (-chunk_pairs[i], i)):
        rank = min((r for r in range(world_size) if len(held[r]) < capacity), key=lambda r: (load[r], r))
        held[rank].append(index)
        load[rank] += chunk_pairs[index]
    ranges = []
    for rank in range(world_size):
        merged: List[Range] = []
        for index in sorted(held[rank]):
            begin, end = starts[index], min(starts[index] + chunk, seqlen)
            if merged and merged[-1][1] == begin:
                merged[-1] = (merged[-1][0], end)
            else:
                merged.append((begin, end))
        ranges.append(merged)
    return Sharding(ranges, seqlen)


def _even_bounds(seqlen: int, parts: int) -> List[int]:
    base, extra = divmod(seqlen, parts)
    bounds = [0]
    for part in range(parts):
        bounds.append(bounds[-1] + base + (1 if part < extra else 0))
    return bounds


def _check_world_size(where: str, world_size) -> None:
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"{where}: world_size must be a positive int, got {world_size!r}")


def _as_range(name: str, item) -> Range:
    if not isinstance(item, (tuple, list)) or len(item) != 2 or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in item):
        raise ValueError(f"{name} must be a (begin, end) pair of ints, got {item!r}")
    return int(item[0]), int(item[1])
