"""The Linux kernel as a Fornax session engine: a Lab of network namespaces (netns.py), the
engine (engine.py: ctnetlink entries, nftables verdict pipeline, NFLOG verdicts, DESTROY
events), the VPC policy as an nftables ruleset for the kernel alone (rules.py, nft.py) and the
packet sender (sender.py)."""

from starfabric.fornax.datapaths.linux.engine import DIFFERENCES, KERNEL_DIFFERENCES, LinuxEngine
from starfabric.fornax.datapaths.linux.netns import Lab, LabConfig, cleanup_stale, linux_support
from starfabric.fornax.datapaths.linux.nft import Nft, NicTables
from starfabric.fornax.datapaths.linux.rules import ScopeVersions, build_ruleset, session_mark
from starfabric.fornax.datapaths.linux.sender import Sender, SeqState, build_frames

__all__ = [
           "DIFFERENCES",
           "KERNEL_DIFFERENCES",
           "Lab",
           "LabConfig",
           "LinuxEngine",
           "Nft",
           "NicTables",
           "ScopeVersions",
           "Sender",
           "SeqState",
           "build_frames",
           "build_ruleset",
           "cleanup_stale",
           "linux_support",
           "session_mark",
]  # fmt: skip
