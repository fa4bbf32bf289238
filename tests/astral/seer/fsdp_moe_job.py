"""The Qwen3-235B-A22B-shaped Megatron-FSDP job two Seer tests price (layer shape from the HF
config; 256 H100, TP 2, EP 8 x ETP 1 inside a host, EDP 32 across hosts, ZeRO-3, full
recompute: the layout the Model Zoo's Megatron-FSDP run states)."""

MOE = {
    "name": "fsdp-moe", "layers": 4, "hidden": 4096, "heads": 64, "kv_heads": 4,
    "head_dim": 128, "ffn_hidden": 12288, "vocab": 151936, "activation": "swiglu",
    "moe_experts": 128, "moe_topk": 8, "moe_ffn_hidden": 1536,
}  # fmt: skip
EX = {
    "global_batch": 2048, "seq_len": 4096, "micro_batch": 4, "tp": 2, "pp": 1, "ep": 8,
    "etp": 1, "sp": True, "zero": 3, "recompute": "full",
}  # fmt: skip
SYSTEM = {"gpu": "H100", "gpus": 256, "gpus_per_node": 8}
