"""Import one of the repository's `scripts/*.py` as a module, for the tests of that script."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[3]


def load_script(name: str) -> ModuleType:
    """`scripts/<name>.py` imported as module `name` (registered in sys.modules, so its
    dataclasses resolve)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
