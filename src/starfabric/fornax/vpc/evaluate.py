"""Batch policy evaluation of first packets: one call decides a whole batch of new
connections, giving both directions' actions, the scopes the session belongs to and the NAT
request.

Conventions (what a packet means to the policy):
- A packet whose `vni` is the spec's `gateway_vni` came from the internet gateway
  (north-south inbound); only an EIP destination reaches an ENI (IPv4).
- Any other packet came from a VM: its ENI is found by (vni, source address) — the overlay
  VNI and the VM's own address identify the sending port, so spoofed or unknown senders are
  NO_ENI. The `port` column is not consulted.
- A packet whose source and destination families differ is NO_ROUTE (NO_DEST from the
  gateway).
- Checks, first failure wins: route (NO_ROUTE, BLACKHOLE) → destination (NO_DEST,
  NO_PUBLIC_IP) → sender SG egress → sender subnet ACL egress → receiver subnet ACL ingress →
  receiver SG ingress. Network ACLs apply only across a subnet boundary (as AWS NACLs do;
  assumption for Fornax's VPC) and, being stateless, also to the reply; security groups are
  stateful, so the reply needs no SG rule. A peered reply also needs the receiver's route
  back through the same peering; the reply of a gateway-inbound connection leaves through
  its EIP without a route lookup (assumption: as a 1:1 NAT gateway does). A reply that would
  be refused gets `rev_reason` and a DROP reverse action while the forward direction is
  allowed.
- Refused packets get a DROP row of the action table carrying the reason (both directions),
  so a drop session can count why; ACTION_DROP (0xFFFFFFFF) stays the hardware's bare drop.
- Session scopes: the ENI that opened the connection (the receiver's for gateway inbound) and
  its VPC; a packet with no ENI is charged to the VPC of its VNI, or to GATEWAY_SCOPE.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from starfabric._jit import frozen_each
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.vpc import _kernels as K
from starfabric.fornax.vpc._kernels import evaluate_kernel
from starfabric.fornax.vpc.codes import NO_SCOPE, NatKind, Reason
from starfabric.fornax.vpc.compile import CompiledPolicy


@dataclass(frozen=True)
class KernelTables:
    """A compiled policy's arrays grouped as the evaluation kernel takes them."""

    net: K.EniTable
    rt: K.RouteTable
    acl: K.AclTable
    sg: K.SgTable


def kernel_tables(c: CompiledPolicy) -> KernelTables:
    """The grouped tables of `c` (views of its arrays: cheap to build per call)."""
    return KernelTables(
            K.EniTable(c.key_vni, c.key_hi, c.key_lo, c.key_eni, c.vni_key, c.vni_vpc,
                       c.eip_key, c.eip_eni, c.eni_vpc, c.eni_subnet, c.eni_act_deliver,
                       c.eni_act_peer, c.eni_act_dnat, c.eni_act_snat_eip, c.vpc_vni,
                       c.subnet_table, c.subnet_acl, c.peer_a, c.peer_b, c.pool_act_snat,
                       c.act_drop),
            K.RouteTable(c.rt_tab_ptr, c.seg_len, c.seg_start, c.seg_end, c.rt_hi, c.rt_lo,
                         c.rt_target, c.rt_via),
            K.AclTable(c.acl_ptr, c.acl_allow, c.acl_proto, c.acl_lo, c.acl_hi, c.acl_net_hi,
                       c.acl_net_lo, c.acl_net_len, c.acl_net_fam),
            K.SgTable(c.eni_sg_ptr, c.eni_sg_idx, c.sg_ptr, c.sgr_dir, c.sgr_proto, c.sgr_lo,
                      c.sgr_hi, c.sgr_net_hi, c.sgr_net_lo, c.sgr_net_len, c.sgr_net_fam,
                      c.sgr_ref),
    )  # fmt: skip


@dataclass(frozen=True)
class PolicyResult:
    """One row per first packet. Matched-rule columns index the compiled `*_names` (-1: none)."""

    reason: npt.NDArray[np.uint8]  # Reason of the forward direction (ALLOW = 0)
    rev_reason: npt.NDArray[np.uint8]  # Reason of the reply direction
    fwd_action: npt.NDArray[np.uint32]  # action handle, forward direction
    rev_action: npt.NDArray[np.uint32]  # action handle, reply direction
    eni_scope: npt.NDArray[np.uint32]  # NO_SCOPE when no ENI
    vpc_scope: npt.NDArray[np.uint32]
    nat_kind: npt.NDArray[np.uint8]  # NatKind
    nat_pool: npt.NDArray[np.int32]  # NAT gateway (pool) id for NatKind.POOL, else -1
    rev_vni: npt.NDArray[np.uint32]  # VNI the reply arrives with
    route: npt.NDArray[np.int32]  # matched route (route_names)
    sg_out: npt.NDArray[np.int32]  # sender's allowing egress rule (sg_rule_names)
    acl_out: npt.NDArray[np.int32]  # deciding egress ACL rule (acl_rule_names)
    acl_in: npt.NDArray[np.int32]  # deciding ingress ACL rule
    sg_in: npt.NDArray[np.int32]  # receiver's allowing ingress rule

    def __len__(self) -> int:
        return len(self.reason)

    @property
    def allowed(self) -> npt.NDArray[np.bool_]:
        return self.reason == Reason.ALLOW

    def row(self, i: int) -> dict[str, int]:
        """Row `i` as plain ints (for reports and tests)."""
        return {f.name: int(getattr(self, f.name)[i]) for f in fields(self)}


def evaluate(compiled: CompiledPolicy, batch: PacketBatch) -> PolicyResult:
    """Decide every packet of `batch` as the first packet of a new connection."""
    n = len(batch)
    c = compiled
    out = PolicyResult(
        reason=np.zeros(n, np.uint8),
        rev_reason=np.zeros(n, np.uint8),
        fwd_action=np.zeros(n, np.uint32),
        rev_action=np.zeros(n, np.uint32),
        eni_scope=np.zeros(n, np.uint32),
        vpc_scope=np.zeros(n, np.uint32),
        nat_kind=np.zeros(n, np.uint8),
        nat_pool=np.zeros(n, np.int32),
        rev_vni=np.zeros(n, np.uint32),
        route=np.zeros(n, np.int32),
        sg_out=np.zeros(n, np.int32),
        acl_out=np.zeros(n, np.int32),
        acl_in=np.zeros(n, np.int32),
        sg_in=np.zeros(n, np.int32),
    )
    t = kernel_tables(c)
    evaluate_kernel(
        K.Packets(*frozen_each((batch.vni, batch.src_hi, batch.src_lo, batch.dst_hi,
                                batch.dst_lo, batch.sport, batch.dport, batch.proto))),
        np.uint32(c.gateway_vni), np.uint32(c.act_igw), t.net, t.rt, t.acl, t.sg,
        K.Decisions(out.reason, out.rev_reason, out.fwd_action, out.rev_action, out.eni_scope,
                    out.vpc_scope, out.nat_kind, out.nat_pool, out.rev_vni, out.route,
                    out.sg_out, out.acl_out, out.acl_in, out.sg_in),
    )  # fmt: skip
    hit = out.route >= 0
    out.route[hit] = c.rt_id[out.route[hit]]
    return out


def describe(compiled: CompiledPolicy, result: PolicyResult, i: int) -> dict[str, object]:
    """Row `i` with ids turned into names: the form the reference evaluator produces."""
    c = compiled

    def name(names: tuple[str, ...], k: int) -> str | None:
        return None if k < 0 else names[k]

    eni = int(result.eni_scope[i])
    pool = int(result.nat_pool[i])
    return {
        "reason": Reason(int(result.reason[i])).name,
        "rev_reason": Reason(int(result.rev_reason[i])).name,
        "fwd": c.describe_action(int(result.fwd_action[i])),
        "rev": c.describe_action(int(result.rev_action[i])),
        "eni": None if eni == NO_SCOPE else c.eni_names[eni],
        "vpc": c.vpc_names[int(result.vpc_scope[i])],
        "nat_kind": NatKind(int(result.nat_kind[i])).name,
        "nat_pool": None if pool < 0 else c.pool_names[pool],
        "rev_vni": int(result.rev_vni[i]),
        "route": name(c.route_names, int(result.route[i])),
        "sg_out": name(c.sg_rule_names, int(result.sg_out[i])),
        "acl_out": name(c.acl_rule_names, int(result.acl_out[i])),
        "acl_in": name(c.acl_rule_names, int(result.acl_in[i])),
        "sg_in": name(c.sg_rule_names, int(result.sg_in[i])),
    }
