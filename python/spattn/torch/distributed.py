"""Context parallelism: attention over a sequence sharded over the ranks of a torch.distributed group.

    import spattn.torch as st
    import spattn.torch.distributed as sd

    mask = st.Mask.from_spec("sliding_window:w=512", n, n)      # global, the same on every rank
    sharding = sd.balance(mask, world_size)                      # or None: contiguous shards
    q_local = sharding.take(q, rank)                             # this rank's positions (and k, v)
    out_local = sd.attention(q_local, k_local, v_local, mask, sharding=sharding)
    out_local.sum().backward()                                   # dq, dk, dv of this rank's positions

Every rank calls ``attention`` with the same mask and sharding (as with any collective). From the
mask an ``ExchangePlan`` (exchange_plan.py) says which of its keys each rank's queries attend; only
those K and V rows travel, point to point (``batch_isend_irecv``). A rank computes attention over
its own keys while they travel, then over the received keys, and merges the two partial results
(``spattn.torch.merge_partials``: exact when a side is empty). The backward keeps the received K
and V, so it sends only dK and dV back to the keys' owners, each of which adds what it receives in
rank order. Results are bitwise identical across repeats.

With ``ledger=CommLedger()``, every word sent and received is counted per operand, beside the
prediction from the plan (equal after every call), a plain ring's words and the lower bound.
"""

import collections
from typing import List, Optional

import torch
import torch.distributed as dist

from . import Mask, _check_call, _check_threads, _translate, merge_partials
from .._ops import ops
from .exchange_plan import ExchangePlan, Words
from .sharding import Sharding, balance

__all__ = ["attention", "balance", "CommLedger", "ExchangePlan", "Sharding"]

_WHERE = "spattn.torch.distributed.attention"
_TAG_K, _TAG_V, _TAG_DK, _TAG_DV = 1, 2, 3, 4
_PLANS: "collections.OrderedDict" = collections.OrderedDict()  # the last few plans, by masks and shardings
_PLANS_KEPT = 8


class CommLedger:
    """Words one rank sent and received, per pass and operand, summed over the calls it recorded:
    ``counted`` from the messages, ``predicted`` from the plan before each call (equal), ``ring``
    what a plain ring would have moved, ``lower_bound`` the remote K and V words the rank's
    attended pairs read (received in the forward)."""

    def __init__(self):
        self.counted = _passes()
        self.predicted = _passes()
        self.ring = _passes()
        self.lower_bound = 0
        self.calls = 0

    def __repr__(self) -> str:
        def short(table):
            return {p: {d: w.total for d, w in table[p].items()} for p in table}
        return f"CommLedger(calls={self.calls}, counted={short(self.counted)}, predicted={short(self.predicted)})"


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, *, sharding: Optional[Sharding] = None,
              kv_sharding: Optional[Sharding] = None, group=None, scale: Optional[float] = None,
              return_lse: bool = False, algorithm: str = "auto", cache_words: int = 0, objective: str = "time",
              threads: Optional[int] = None, ledger: Optional[CommLedger] = None):
    """This rank's shard of attention over the global ``mask``, differentiable in q, k and v.

    q is (batch, heads, local seqlen_q, head_dim), k and v (batch, kv_heads, local seqlen_k,
    head_dim[_v]): this rank's positions under ``sharding`` (queries) and ``kv_sharding`` (keys;
    default: ``sharding`` for a square mask). ``sharding`` None splits the positions contiguously,
    lengths within one. ``mask`` is one global Mask (seqlen_q x seqlen_k) or one per query head.
    Returns this rank's rows of the output (and of the LSE with ``return_lse``). ``group`` is the
    process group (None: the default one); its timeout bounds every wait, so a rank that fails or
    never calls makes the others raise, not hang. The other arguments are those of
    ``spattn.torch.attention`` (CPU: float32).
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"{_WHERE}: torch.distributed is not initialized (call init_process_group first)")
    rank = dist.get_rank(group)
    world_size = dist.get_world_size(group)
    if rank < 0:
        raise ValueError(f"{_WHERE}: this process is not a member of the group")
    masks = [mask] if isinstance(mask, Mask) else mask
    if not isinstance(masks, (list, tuple)) or not masks or not all(isinstance(m, Mask) for m in masks):
        raise TypeError(f"{_WHERE}: mask must be a spattn.torch.Mask or a list of one per query head")
    seqlen_q, seqlen_k = masks[0].shape
    sharding = sharding if sharding is not None else Sharding.contiguous(seqlen_q, world_size)
    if kv_sharding is None:
        kv_sharding = sharding if seqlen_q == seqlen_k else Sharding.contiguous(seqlen_k, world_size)
    for name, s, seqlen in (("sharding", sharding, seqlen_q), ("kv_sharding", kv_sharding, seqlen_k)):
        if not isinstance(s, Sharding):
            raise TypeError(f"{_WHERE}: {name} must be a Sharding or None, got {type(s).__name__}")
        if s.world_size != world_size:
            raise ValueError(f"{_WHERE}: {name} has {s.world_size} ranks, the group {world_size}")
        if s.seqlen != seqlen:
            raise ValueError(f"{_WHERE}: {name} covers {s.seqlen} positions, the mask has {seqlen}")
    for name, t, s in (("q", q, sharding), ("k", k, kv_sharding), ("v", v, kv_sharding)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{_WHERE}: {name} must be a 4-D tensor (batch, heads, local seqlen, dim)")
        if t.shape[2] != s.length(rank):
            raise ValueError(f"{_WHERE}: {name} has {t.shape[2]} positions, rank {rank} holds {s.length(rank)}")
    if q.device.type == "cpu" and q.dtype != torch.float32:
        raise TypeError(f"{_WHERE}: q has dtype {q.dtype}; on the CPU the sharded call runs float32 (partial results "
                        "merge in float32)")
    if ledger is not None and not isinstance(ledger, CommLedger):
        raise TypeError(f"{_WHERE}: ledger must be a CommLedger or None, got {type(ledger).__name__}")
    plan = _plan_for(masks, sharding, kv_sharding)
    own_masks, remote_masks = plan.rank_masks(rank)
    # The local calls' shapes and settings are those of spattn.torch.attention on this rank's rows.
    _check_call(_WHERE, q, k, v, own_masks if len(masks) > 1 else own_masks[0], scale, algorithm, cache_words, objective)
    settings = (scale, algorithm, int(cache_words), 0, objective, _check_threads(threads))  # 0: 16-word lines
    call = _Call(plan, rank, group, own_masks, remote_masks, settings, ledger)
    out, lse = _ShardedAttention.apply(q, k, v, call)
    return (out, lse) if return_lse else out


class _Call:
    """What one call's forward and backward share: the plan, this rank's masks, the settings."""

    def __init__(self, plan: ExchangePlan, rank: int, group, own_masks: List[Mask], remote_masks: List[Mask],
                 settings, ledger: Optional[CommLedger]):
        self.plan, self.rank, self.group = plan, rank, group
        self.own_keys = [m._key for m in own_masks]
        self.remote_keys = [m._key for m in remote_masks]
        self.masks = (own_masks, remote_masks)  # the keys name these: keep them alive
        self.settings = settings
        self.ledger = ledger
        self.peers = [_global_rank(group, r) for r in range(plan.world_size)]

    def record(self, pass_: str, direction: str, operand: str, tensor: torch.Tensor) -> None:
        if self.ledger is not None:
            self.ledger.counted[pass_][direction][operand] += tensor.numel()

    def predict(self, batch: int, kv_heads: int, head_dim: int, head_dim_v: int) -> None:
        if self.ledger is None:
            return
        shape = (self.rank, batch, kv_heads, head_dim, head_dim_v)
        for table, words in ((self.ledger.predicted, self.plan.predicted(*shape)), (self.ledger.ring, self.plan.ring(*shape))):
            for pass_ in words:
                for direction in words[pass_]:
                    table[pass_][direction].add(words[pass_][direction])
        self.ledger.lower_bound += self.plan.lower_bound(*shape)
        self.ledger.calls += 1


class _ShardedAttention(torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, v, call: _Call):
        plan, rank = call.plan, call.rank
        call.predict(k.shape[0], k.shape[1], k.shape[3], v.shape[3])
        sends, receives = [], []
        for peer in range(plan.world_size):
            index = plan.send_index[rank][peer].to(k.device)
            if index.numel():
                for tag, x, operand in ((_TAG_K, k, "k"), (_TAG_V, v, "v")):
                    part = x.detach().index_select(2, index).contiguous()
                    sends.append((peer, part, tag))
                    call.record("forward", "sent", operand, part)
            count = plan.send_index[peer][rank].numel()
            if count:
                receives.append((peer, torch.empty(k.shape[0], k.shape[1], count, k.shape[3], dtype=k.dtype, device=k.device), _TAG_K))
                receives.append((peer, torch.empty(v.shape[0], v.shape[1], count, v.shape[3], dtype=v.dtype, device=v.device), _TAG_V))
        pending = _post(call, sends, receives, "forward")
        # Own keys first, while the remote ones travel.
        out, lse = _translate(lambda: ops.forward(q, k, v, call.own_keys, *call.settings))
        _wait(call, pending, "forward")
        k_remote = _stack([buffer for _, buffer, tag in receives if tag == _TAG_K], k)
        v_remote = _stack([buffer for _, buffer, tag in receives if tag == _TAG_V], v)
        for _, buffer, tag in receives:
            call.record("forward", "received", "k" if tag == _TAG_K else "v", buffer)
        if k_remote.shape[2]:
            out_remote, lse_remote = _translate(lambda: ops.forward(q, k_remote, v_remote, call.remote_keys, *call.settings))
            out, lse = merge_partials(out, lse, out_remote, lse_remote)
        ctx.save_for_backward(q, k, v, k_remote, v_remote, out, lse)
        ctx.call = call
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, k_remote, v_remote, out, lse = ctx.saved_tensors
        call = ctx.call
        plan, rank = call.plan, call.rank
        if d_out is None:
            d_out = torch.zeros_like(out)  # the peers still wait for this rank's dK and dV
        d_out = d_out.to(q.dtype).contiguous()
        sends, receives = [], []
        dq = None
        if k_remote.shape[2]:
            # The received keys' gradients first, so that they travel while the own keys' run.
            dq, dk_remote, dv_remote = _translate(lambda: ops.backward(
                q, k_remote, v_remote, out, lse, d_out, call.remote_keys, *call.settings))
            offset = 0
            for peer in range(plan.world_size):
                count = plan.send_index[peer][rank].numel()
                if count:
                    for tag, grad, operand in ((_TAG_DK, dk_remote, "dk"), (_TAG_DV, dv_remote, "dv")):
                        part = grad.narrow(2, offset, count).contiguous()
                        sends.append((peer, part, tag))
                        call.record("backward", "sent", operand, part)
                    offset += count
        for peer in range(plan.world_size):
            count = plan.send_index[rank][peer].numel()
            if count:
                receives.append((peer, torch.empty(k.shape[0], k.shape[1], count, k.shape[3], dtype=k.dtype, device=k.device), _TAG_DK))
                receives.append((peer, torch.empty(v.shape[0], v.shape[1], count, v.shape[3], dtype=v.dtype, device=v.device), _TAG_DV))
        pending = _post(call, sends, receives, "backward")
        dq_own, dk, dv = _translate(lambda: ops.backward(q, k, v, out, lse, d_out, call.own_keys, *call.settings))
        dq = dq_own if dq is None else dq_own + dq
        _wait(call, pending, "backward")
        # Contributions to this rank's keys, added in rank order whatever order they arrived in.
        for peer, buffer, tag in receives:
            index = plan.send_index[rank][peer].to(buffer.device)
            target, operand = (dk, "dk") if tag == _TAG_DK else (dv, "dv")
            target.index_add_(2, index, buffer)
            call.record("backward", "received", operand, buffer)
        return dq, dk, dv, None


def _post(call: _Call, sends, receives, pass_: str):
    """Starts every send and receive of one exchange; nothing when there is nothing to move. A peer
    that failed can show here or in _wait, depending on when its failure reaches this rank: both
    say the exchange failed."""
    operations = [dist.P2POp(dist.isend, tensor, call.peers[peer], call.group, tag) for peer, tensor, tag in sends]
    operations += [dist.P2POp(dist.irecv, tensor, call.peers[peer], call.group, tag) for peer, tensor, tag in receives]
    if not operations:
        return []
    try:
        return dist.batch_isend_irecv(operations)
    except RuntimeError as error:
        raise RuntimeError(f"{_WHERE}: rank {call.rank}: the {pass_} exchange failed to start (a peer failed, "
                           f"timed out or called with another plan): {error}") from None


def _wait(call: _Call, pending, pass_: str) -> None:
    for request in pending:
        try:
            request.wait()
        except RuntimeError as error:
            raise RuntimeError(f"{_WHERE}: rank {call.rank}: the {pass_} exchange failed (a peer failed, "
                               f"timed out or called with another plan): {error}") from None


def _stack(buffers: List[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    if not buffers:
        return like.new_empty(like.shape[0], like.shape[1], 0, like.shape[3])
    return buffers[0] if len(buffers) == 1 else torch.cat(buffers, dim=2)


def _plan_for(masks: List[Mask], sharding: Sharding, kv_sharding: Sharding) -> ExchangePlan:
    """The plan of these masks and shardings, built once and kept (mask keys are never reused)."""
    key = (tuple(m._key for m in masks), _ranges_key(sharding), _ranges_key(kv_sharding))
    plan = _PLANS.get(key)
    if plan is None:
        plan = ExchangePlan(masks, sharding, kv_sharding)
        _PLANS[key] = plan
        while len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
    _PLANS.move_to_end(key)
    return plan


def _ranges_key(sharding: Sharding):
    return sharding.seqlen, tuple(tuple(r) for r in sharding.ranges)


def _global_rank(group, rank: int) -> int:
    if group is None or group is dist.GroupMember.WORLD:
        return rank
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, rank)
    return dist.distributed_c10d._get_global_rank(group, rank)


def _passes():
    return {pass_: {"sent": Words(), "received": Words()} for pass_ in ("forward", "backward")}
