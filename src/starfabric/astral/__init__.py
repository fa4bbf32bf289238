"""Astral: datacenter infrastructure for LLM training at scale (SIGCOMM 2025)."""
