"""The exchange plan of context parallelism: which keys each rank sends to which, from the mask.

Rank r's queries need the K and V rows of exactly the key positions its attended pairs read. The
plan lists, for every ordered pair of ranks (s, r), the local indices of s's keys that r's queries
attend (one pass over the mask's CSR, O(nnz + world_size x seqlen_k) time, no copy of the mask);
nothing else is sent, so a
sliding window talks only to neighbours, documents only within a document, causal only downward.
The words each rank sends and receives follow in closed form, before any call, beside what a plain
ring would move and the lower bound (which this exchange meets: it sends exactly the remote keys
the rank's pairs read).
"""

from typing import Dict, List, Sequence, Tuple

import torch

from . import Mask
from .sharding import Sharding

__all__ = ["ExchangePlan", "Words"]

class Words(dict):
    """Words (tensor elements) per operand: k, v, dk, dv, o, lse."""

    OPERANDS = ("k", "v", "dk", "dv", "o", "lse")

    def __init__(self, **counts):
        super().__init__({name: 0 for name in self.OPERANDS})
        for name, count in counts.items():
            self[name] += count

    def add(self, other: "Words") -> None:
        for name in self.OPERANDS:
            self[name] += other[name]

    @property
    def total(self) -> int:
        return sum(self.values())


class ExchangePlan:
    """For ``masks`` (one per query head, or one), queries sharded by ``q_sharding`` and keys by
    ``kv_sharding``: ``send_index[s][r]``, the local indices of rank s's keys that rank r's queries
    attend (empty for s == r: a rank's own keys never travel)."""

    def __init__(self, masks: Sequence[Mask], q_sharding: Sharding, kv_sharding: Sharding):
        self.masks = list(masks)
        seqlen_q, seqlen_k = self.masks[0].shape
        if q_sharding.seqlen != seqlen_q or kv_sharding.seqlen != seqlen_k:
            raise ValueError(f"ExchangePlan: the mask is {seqlen_q} x {seqlen_k}, the shardings cover "
                             f"{q_sharding.seqlen} query and {kv_sharding.seqlen} key positions")
        if q_sharding.world_size != kv_sharding.world_size:
            raise ValueError(f"ExchangePlan: the query sharding has {q_sharding.world_size} ranks, "
                             f"the key sharding {kv_sharding.world_size}")
        self.q_sharding = q_sharding
        self.kv_sharding = kv_sharding
        self.world_size = q_sharding.world_size
        attended = self._attended_keys()
        self.send_index: List[List[torch.Tensor]] = []
        # The lower bound from the attended keys directly (not from send_index): the remote key
        # positions each rank's queries read.
        self.remote_attended: List[int] = [
            int(attended[rank].sum()) - int(attended[rank, kv_sharding.positions(rank)].sum())
            for rank in range(self.world_size)]
        for source in range(self.world_size):
            keys = kv_sharding.positions(source)
            row = []
            for rank in range(self.world_size):
                if rank == source:
                    row.append(torch.zeros(0, dtype=torch.int64))
                    continue
                row.append(attended[rank, keys].nonzero().flatten())
            self.send_index.append(row)
        self._rank_masks: Dict[int, Tuple[List[Mask], List[Mask]]] = {}

    def _attended_keys(self) -> torch.Tensor:
        """(world_size, seqlen_k) bool: whether any query of rank r attends key position j. Each
        distinct mask is walked over each rank's rows in C++ (attended_keys): nothing is copied."""
        attended = torch.zeros(self.world_size, self.masks[0].shape[1], dtype=torch.bool)
        distinct = {mask._key: mask for mask in self.masks}.values()
        for rank in range(self.world_size):
            rows = torch.tensor(self.q_sharding.ranges[rank], dtype=torch.int64).reshape(-1, 2)
            for mask in distinct:
                attended[rank, mask._handle.attended_keys(rows)] = True
        return attended

    def received_keys(self, rank: int) -> int:
        """Remote key positions rank ``rank`` receives (each once, whatever its heads)."""
        return sum(self.send_index[s][rank].numel() for s in range(self.world_size))

    def sent_keys(self, rank: int) -> int:
        return sum(index.numel() for index in self.send_index[rank])

    def remote_columns(self, rank: int) -> List[Tuple[int, int]]:
        """The global key positions rank ``rank`` receives, in the order it stacks them (by source
        rank, then local order), as ranges."""
        ranges: List[Tuple[int, int]] = []
        for source in range(self.world_size):
            positions = self.kv_sharding.positions(source)[self.send_index[source][rank]]
            ranges.extend(_runs(positions))
        return ranges

    def rank_masks(self, rank: int) -> Tuple[List[Mask], List[Mask]]:
        """The masks rank ``rank`` runs, per head: over its own keys, and over the received keys.
        Built once per plan (heads sharing a Mask share the selection)."""
        if rank not in self._rank_masks:
            rows = self.q_sharding.ranges[rank]
            own_cols = self.kv_sharding.ranges[rank]
            remote_cols = self.remote_columns(rank)
            selected: Dict[int, Tuple[Mask, Mask]] = {}
            own, remote = [], []
            whole = rows == [(0, self.q_sharding.seqlen)] and own_cols == [(0, self.kv_sharding.seqlen)]
            for mask in self.masks:
                if mask._key not in selected:  # one rank holding everything runs the mask itself
                    own_mask = mask if whole else mask.select(rows, own_cols)
                    selected[mask._key] = (own_mask, mask.select(rows, remote_cols))
                own.append(selected[mask._key][0])
                remote.append(selected[mask._key][1])
            self._rank_masks[rank] = (own, remote)
        return self._rank_masks[rank]

    def predicted(self, rank: int, batch: int, kv_heads: int, head_dim: int, head_dim_v: int) -> Dict[str, Dict[str, Words]]:
        """Words rank ``rank`` sends and receives in one forward and one backward."""
        received = self.received_keys(rank) * batch * kv_heads
        sent = self.sent_keys(rank) * batch * kv_heads
        return {
            "forward": {"sent": Words(k=sent * head_dim, v=sent * head_dim_v),
                        "received": Words(k=received * head_dim, v=received * head_dim_v)},
            "backward": {"sent": Words(dk=received * head_dim, dv=received * head_dim_v),
                         "received": Words(dk=sent * head_dim, dv=sent * head_dim_v)},
        }

    def ring(self, rank: int, batch: int, kv_heads: int, head_dim: int, head_dim_v: int) -> Dict[str, Dict[str, Words]]:
        """What a plain ring moves for the same call: every other rank's whole K and V shard reaches
        every rank in the forward, and again in the backward with dK and dV travelling back
        (ring-flash-attention's schedule). A rank sends all shards but its successor's."""
        lengths = [self.kv_sharding.length(s) for s in range(self.world_size)]
        width = batch * kv_heads
        received = (sum(lengths) - lengths[rank]) * width
        sent = (sum(lengths) - lengths[(rank + 1) % self.world_size]) * width if self.world_size > 1 else 0
        return {
            "forward": {"sent": Words(k=sent * head_dim, v=sent * head_dim_v),
                        "received": Words(k=received * head_dim, v=received * head_dim_v)},
            "backward": {"sent": Words(k=sent * head_dim, v=sent * head_dim_v, dk=sent * head_dim, dv=sent * head_dim_v),
                         "received": Words(k=received * head_dim, v=received * head_dim_v,
                                           dk=received * head_dim, dv=received * head_dim_v)},
        }

    def lower_bound(self, rank: int, batch: int, kv_heads: int, head_dim: int, head_dim_v: int) -> int:
        """Words rank ``rank`` must receive in the forward: the remote K and V rows its attended pairs
        read (each remote key position its queries attend, once)."""
        return self.remote_attended[rank] * batch * kv_heads * (head_dim + head_dim_v)


def _runs(positions: torch.Tensor) -> List[Tuple[int, int]]:
    """Consecutive runs of increasing-by-one positions, as (begin, end) ranges."""
    if positions.numel() == 0:
        return []
    breaks = ((positions[1:] - positions[:-1]) != 1).nonzero().flatten() + 1
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), breaks]).tolist()
    ends = torch.cat([breaks, torch.tensor([positions.numel()])]).tolist()
    values = positions.tolist()
    return [(values[s], values[e - 1] + 1) for s, e in zip(starts, ends)]
