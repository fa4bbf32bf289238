"""scripts/seer_class_table.py: the docs' error-per-class table comes from `seer validate --json`
files, with a set's missing class shown as 0 rows and bad files refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astral.seer.load_script import load_script


def _script() -> Any:
    return load_script("seer_class_table")


def _doc(classes: dict[str, dict[str, tuple[int, float, float]]], errors: list[float]) -> dict:
    per = {d: {c: {"rows": n, "mean_abs_error": m, "max_abs_error": x} for c, (n, m, x) in cs.items()}
           for d, cs in classes.items()}  # fmt: skip
    return {"per_class": per, "rows": [{} for _ in errors], "mean_abs_error": sum(errors) / len(errors),
            "max_abs_error": max(errors)}  # fmt: skip


def test_table_has_one_column_pair_per_set_and_a_class_one_set_lacks(
    tmp_path: Path, capsys
) -> None:
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps(_doc({"arch": {"dense": (2, 0.05, 0.08)}}, [0.02, 0.08])))
    b.write_text(
        json.dumps(_doc({"arch": {"dense": (1, 0.1, 0.1), "MoE": (1, 0.3, 0.3)}}, [0.1, 0.3]))
    )
    assert _script().main([f"one={a}", f"two={b}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| dimension | class | one rows | one mean / max | two rows | two mean / max |"
    assert "| arch | dense | 2 | 5.0% / 8.0% | 1 | 10.0% / 10.0% |" in out
    assert "| arch | MoE | 0 | — | 1 | 30.0% / 30.0% |" in out
    assert out[-1] == "| all | all | 2 | 5.0% / 8.0% | 2 | 20.0% / 30.0% |"


def test_a_file_that_is_not_validate_output_is_refused(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    assert _script().main([f"x={bad}"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "fix:" in err and err[-1] == "\n" and err.count("\n") == 1
    assert _script().main(["no-equals-sign"]) == 2
