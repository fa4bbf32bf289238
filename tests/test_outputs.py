"""The output layer: paths checked before work, files replaced only by a complete new file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from starfabric import outputs
from starfabric.errors import ConfigError


def test_write_json_replaces_atomically_and_leaves_no_temporaries(tmp_path: Path) -> None:
    p = tmp_path / "a" / "r.json"
    outputs.write_json(p, {"x": 1})
    outputs.write_json(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 2}
    assert [q.name for q in p.parent.iterdir()] == ["r.json"]


def test_a_failed_write_keeps_the_good_file(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    outputs.write_json(p, {"good": True})
    with pytest.raises(TypeError):
        outputs.write_json(p, {"bad": object()})  # not serializable: fails before the file
    with pytest.raises(RuntimeError), outputs.atomic_path(p) as tmp:
        tmp.write_text("half a fil")
        raise RuntimeError("the computation failed half way")
    assert json.loads(p.read_text()) == {"good": True}
    assert [q.name for q in tmp_path.iterdir()] == ["r.json"]


def test_replacing_copy_changes_the_file_only_on_success(tmp_path: Path) -> None:
    p = tmp_path / "db.bin"
    with pytest.raises(RuntimeError), outputs.replacing_copy(p) as work:
        work.write_bytes(b"partial")
        raise RuntimeError("ingest failed")
    assert not p.exists()  # no empty file left behind
    p.write_bytes(b"good")
    with pytest.raises(RuntimeError), outputs.replacing_copy(p) as work:
        assert work.read_bytes() == b"good"
        work.write_bytes(b"good+partial")
        raise RuntimeError("ingest failed")
    assert p.read_bytes() == b"good"
    with outputs.replacing_copy(p) as work:
        work.write_bytes(b"good+more")
    assert p.read_bytes() == b"good+more"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["db.bin"]


def test_permission_bits_of_a_replaced_file_are_kept(tmp_path: Path) -> None:
    p = tmp_path / "r.txt"
    p.write_text("old")
    p.chmod(0o640)
    outputs.write_text(p, "new")
    assert p.read_text() == "new" and (p.stat().st_mode & 0o777) == 0o640


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda d: d, "is a folder"),
        (lambda d: (d / "f.txt").touch() or d / "f.txt" / "x.json", "is not a folder"),
        (lambda d: Path("/proc/sf19-no-such/x.json"), "cannot write in /proc"),
        (lambda d: " ", "empty path"),
    ],
)
def test_check_file_refuses_unwritable_paths(tmp_path: Path, make, why: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=why) as err:
        outputs.check_file(make(tmp_path), "--json")
    assert "--json" in err.value.one_line() and "fix:" in err.value.one_line()


def test_check_file_accepts_new_folders_and_existing_files(tmp_path: Path) -> None:
    assert outputs.check_file(tmp_path / "new" / "deeper" / "x.json", "--json")
    (tmp_path / "x.json").write_text("{}")
    assert outputs.check_file(tmp_path / "x.json", "--json")
    assert not (tmp_path / "new").exists()  # checking creates nothing
    assert sorted(q.name for q in tmp_path.iterdir()) == ["x.json"]


def test_check_dir(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        outputs.check_dir(tmp_path / "f", "--out")
    with pytest.raises(ConfigError, match="cannot write in /proc"):
        outputs.check_dir("/proc/sf19-no-such", "--out")
    assert outputs.check_dir(tmp_path / "new", "--out") == tmp_path / "new"


def test_save_figure_writes_the_suffix_format(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    p = outputs.save_figure(fig, tmp_path / "f.png")
    plt.close(fig)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
