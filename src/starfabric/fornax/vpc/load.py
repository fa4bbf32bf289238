"""Reading a VPC file: field checks (pydantic, spec.py) then cross-object checks
(validate.py), in that order, so spec.py and validate.py never import each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starfabric.config import parse_spec, read_mapping
from starfabric.fornax.vpc.spec import VpcSpec
from starfabric.fornax.vpc.validate import validate_vpc_spec


def parse_vpc_spec(data: dict[str, Any], source: str = "") -> VpcSpec:
    """Validate a mapping into a VpcSpec, fields then cross-object references."""
    spec = parse_spec(VpcSpec, data, source=source)
    validate_vpc_spec(spec, source=source)
    return spec


def load_vpc_spec(path: str | Path) -> VpcSpec:
    """Read and validate a VPC file (YAML or JSON)."""
    return parse_vpc_spec(read_mapping(path), source=str(path))


__all__ = ["load_vpc_spec", "parse_vpc_spec"]
