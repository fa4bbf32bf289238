"""Fornax: hardware-centric SmartNIC session management (SIGCOMM 2025)."""

from starfabric.fornax.packets import PacketBatch, halves_to_ip, ip_to_halves

__all__ = ["PacketBatch", "halves_to_ip", "ip_to_halves"]
