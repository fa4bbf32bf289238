"""Real datapaths under the Fornax manager: implementations of the SessionEngine contract
(fornax/engine/interface.py) over an existing packet processor. `linux`: nf_conntrack and
nftables in a network namespace (LinuxEngine)."""

from starfabric.fornax.datapaths.linux import KERNEL_DIFFERENCES, LinuxEngine, linux_support

__all__ = ["KERNEL_DIFFERENCES", "LinuxEngine", "linux_support"]
