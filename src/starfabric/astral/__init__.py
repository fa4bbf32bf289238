"""Astral: datacenter infrastructure for LLM training at scale (SIGCOMM 2025)."""

from starfabric.astral.hardware import GPUSpec, get_gpu, list_gpus

__all__ = ["GPUSpec", "get_gpu", "list_gpus"]
