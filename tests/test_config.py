from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from starfabric.config import Spec, load_spec, parse_spec
from starfabric.errors import ConfigError


class Port(Spec):
    name: str
    speed_gbps: int = Field(gt=0)


class Switch(Spec):
    radix: int = Field(ge=2)
    ports: tuple[Port, ...] = ()


def test_valid_spec_is_frozen() -> None:
    spec = parse_spec(Switch, {"radix": 64, "ports": [{"name": "p0", "speed_gbps": 200}]})
    assert spec.ports[0].speed_gbps == 200
    with pytest.raises(ValidationError):
        spec.radix = 3  # type: ignore[misc]


def test_unknown_key_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_spec(Switch, {"radix": 64, "radx": 3}, source="cluster.yaml")
    msg = exc.value.one_line()
    assert msg.startswith("cluster.yaml: unknown field 'radx'")
    assert "check its spelling" in msg


def test_nested_value_error_names_path_and_value() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_spec(Switch, {"radix": 64, "ports": [{"name": "p0", "speed_gbps": -1}]})
    msg = exc.value.one_line()
    assert "ports[0].speed_gbps" in msg and "-1" in msg and "\n" not in msg


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_spec(Switch, tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("radix: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(Switch, bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_spec(Switch, scalar)
