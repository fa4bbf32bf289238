"""The Linux kernel as a Fornax session engine: a Lab of network namespaces (netns.py), the
engine (engine.py: ctnetlink entries, nftables verdict pipeline, NFLOG verdicts, DESTROY
events), the VPC policy as an nftables ruleset for the kernel alone (rules.py, nft.py) and the
packet sender (sender.py)."""

from starfabric.fornax.datapaths.linux.engine import KERNEL_DIFFERENCES, LinuxEngine
from starfabric.fornax.datapaths.linux.netns import Lab, LabConfig, linux_support

__all__ = ["KERNEL_DIFFERENCES", "Lab", "LabConfig", "LinuxEngine", "linux_support"]
