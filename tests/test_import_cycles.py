"""No import cycles in src/ (scripts/import_cycles.py: strongly connected components of grimp's
module graph, imports inside functions and under TYPE_CHECKING included), and the checker is
shown to find cycles in a package made with them on purpose."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _checker() -> Any:
    name = "import_cycles"
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_src_has_no_import_cycles() -> None:
    """Every module of starfabric, as installed from this checkout's src/."""
    import starfabric

    assert Path(starfabric.__file__).resolve().is_relative_to(ROOT / "src"), starfabric.__file__
    ic = _checker()
    graph = ic.build(["starfabric"])
    assert len(graph.modules) > 100  # the whole package, not a stub
    cycles = ic.strongly_connected(graph)
    assert not cycles, "import cycles in src/ (move what both sides need to a third module):\n" + (
        "\n".join(ic.describe(graph, cycles))
    )


# A package with a cycle of each kind the checker must see, and modules outside any cycle.
_FIXTURE = {
    "__init__.py": "",
    # a -> b at the top, b -> a inside a function: a cycle (hiding the import does not break it)
    "a.py": "from cyclefix import b\n",
    "b.py": "def f():\n    from cyclefix import a\n    return a\n",
    # c -> d only for type checking, d -> c: a cycle
    "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclefix.d import D\n",
    "d.py": "import cyclefix.c\nclass D: ...\n",
    # x -> y -> z -> x: one component of three
    "x.py": "import cyclefix.y\n",
    "y.py": "from cyclefix.z import Z\n",
    "z.py": "from cyclefix import x\nclass Z: ...\n",
    # no cycle: e -> f -> g, and the subpackage imports a (a imports nothing of it)
    "e.py": "import cyclefix.f\n",
    "f.py": "import cyclefix.g\n",
    "g.py": "",
    "sub/__init__.py": "from cyclefix import a\n",
}


@pytest.fixture
def cyclefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for rel, text in _FIXTURE.items():
        p = tmp_path / "cyclefix" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return "cyclefix"


def test_checker_reports_every_deliberate_cycle(cyclefix: str) -> None:
    cycles = _checker().find_cycles(cyclefix)
    assert cycles == [
        ["cyclefix.a", "cyclefix.b"],
        ["cyclefix.c", "cyclefix.d"],
        ["cyclefix.x", "cyclefix.y", "cyclefix.z"],
    ]


def test_checker_command_fails_listing_the_imports(
    cyclefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _checker().main([cyclefix]) == 1
    out = capsys.readouterr().out
    assert "cycle 1: cyclefix.a <-> cyclefix.b" in out
    assert "cyclefix.b:2 -> cyclefix.a" in out  # the import inside a function, with its line
    assert "cyclefix.c:3 -> cyclefix.d" in out  # the TYPE_CHECKING import
    assert out.rstrip().endswith("import cycles in cyclefix: 3")


def test_checker_command_passes_without_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = tmp_path / "acyclicfix"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import acyclicfix.b\n")
    (pkg / "b.py").write_text("def f():\n    import acyclicfix.c\n")
    (pkg / "c.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert _checker().main(["acyclicfix"]) == 0
    assert capsys.readouterr().out == "import cycles in acyclicfix: 0\n"
    assert "acyclicfix" not in sys.modules  # grimp reads the source, it imports nothing
