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


def test_whole_spec_check_is_reported_in_its_own_words() -> None:
    """A model validator's message names its fields; no '<root>' and no dump of the input."""
    from pydantic import model_validator

    class Two(Spec):
        lo: int = 0
        hi: int = 1

        @model_validator(mode="after")
        def _order(self) -> "Two":
            if self.lo >= self.hi:
                raise ValueError(f"lo {self.lo} >= hi {self.hi}")
            return self

    class Outer(Spec):
        two: Two = Two()

    with pytest.raises(ConfigError) as e:
        parse_spec(Two, {"lo": 5, "hi": 2}, source="x.yaml")
    assert e.value.one_line() == "x.yaml: lo 5 >= hi 2 (fix: correct the value)"
    with pytest.raises(ConfigError) as e:
        parse_spec(Outer, {"two": {"lo": 5, "hi": 2}}, source="y.yaml")
    assert e.value.one_line() == "y.yaml: field 'two': lo 5 >= hi 2 (fix: correct the value)"
