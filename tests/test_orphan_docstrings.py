"""An attribute docstring sits right under its assignment; two string statements in a row
leave the second documenting nothing (and gen_assumptions.py credits the first's name with
the wrong text), as validate.py's CUDA_GRAPHS / ROUTER_FUSION pair did."""

import ast
import itertools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "starfabric"


def _is_str(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _orphans(body: list[ast.stmt], path: Path) -> list[str]:
    out = [f"{path}:{b.lineno}" for a, b in itertools.pairwise(body) if _is_str(a) and _is_str(b)]
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            out += _orphans(stmt.body, path)
    return out


def test_no_docstring_follows_a_docstring() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        found += _orphans(ast.parse(path.read_text()).body, path.relative_to(SRC))
    assert found == []
