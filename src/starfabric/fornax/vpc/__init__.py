"""Tenant network model: declarative spec → compiled arrays → batch policy evaluation.

`load_vpc_spec` reads a VPC file, `compile_policy` flattens it (ids stable across
recompiles), `evaluate` decides a batch of first packets, `affected_scopes` says which ENI
and VPC scopes a change touches, and `ReferencePolicy` is the slow twin used in tests.
"""

from starfabric.fornax.vpc.codes import (
    ACTION_DROP,
    ACTION_DTYPE,
    GATEWAY_SCOPE,
    NO_SCOPE,
    ActionKind,
    NatKind,
    Reason,
    RouteTarget,
)
from starfabric.fornax.vpc.compile import CompiledPolicy, compile_policy
from starfabric.fornax.vpc.diff import AffectedScopes, affected_scopes, recompile
from starfabric.fornax.vpc.evaluate import PolicyResult, describe, evaluate
from starfabric.fornax.vpc.load import load_vpc_spec, parse_vpc_spec
from starfabric.fornax.vpc.reference import ReferencePolicy
from starfabric.fornax.vpc.spec import VpcSpec
from starfabric.fornax.vpc.validate import validate_vpc_spec

__all__ = [
    "ACTION_DROP",
    "ACTION_DTYPE",
    "GATEWAY_SCOPE",
    "NO_SCOPE",
    "ActionKind",
    "AffectedScopes",
    "CompiledPolicy",
    "NatKind",
    "PolicyResult",
    "Reason",
    "ReferencePolicy",
    "RouteTarget",
    "VpcSpec",
    "affected_scopes",
    "compile_policy",
    "describe",
    "evaluate",
    "load_vpc_spec",
    "parse_vpc_spec",
    "recompile",
    "validate_vpc_spec",
]
