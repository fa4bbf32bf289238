"""List every import cycle in a package: the strongly connected components (of two or more
modules) of its module-level import graph, as grimp builds it.

    python scripts/import_cycles.py [PACKAGE ...]     # default: starfabric; exit 1 on a cycle

Which imports count: every import grimp finds in a module's source, wherever it stands — at
the top, inside a function, or under `if TYPE_CHECKING:`. An import moved into a function
still makes the two modules depend on each other at run time, and one under TYPE_CHECKING
still makes them know each other's names; neither breaks a cycle, so neither hides one here.
What both sides need goes to a third module (a types, protocol, registry or result module).
A package's `__init__` is a module like the others: it is in a cycle only through its own
imports, not because its submodules live in it.

`make test` runs this (the `layering` step) and tests/test_import_cycles.py checks the same on
src/ and on a small package made with a cycle on purpose.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

import grimp


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Components of two or more modules that import each other, directly or through others
    (Tarjan's algorithm, iterative); each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        while work:
            v, succ = work[-1]
            for w in succ:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found)


def build(packages: Iterable[str]) -> grimp.ImportGraph:
    """The import graph of `packages`, every import counted (see the module docstring)."""
    first, *rest = packages
    return grimp.build_graph(first, *rest, exclude_type_checking_imports=False, cache_dir=None)


def find_cycles(*packages: str) -> list[list[str]]:
    """The import cycles of `packages` (default: starfabric), as sorted module lists."""
    return strongly_connected(build(packages or ("starfabric",)))


def describe(graph: grimp.ImportGraph, cycles: list[list[str]]) -> list[str]:
    """Each cycle with the imports inside it (importer:line -> imported)."""
    lines = []
    for i, comp in enumerate(cycles, 1):
        lines.append(f"cycle {i}: {' <-> '.join(comp)}")
        members = set(comp)
        for a in comp:
            for b in sorted(graph.find_modules_directly_imported_by(a) & members):
                for d in graph.get_import_details(importer=a, imported=b):
                    lines.append(f"    {a}:{d['line_number']} -> {b}   {d['line_contents']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*", default=["starfabric"])
    args = ap.parse_args(argv)
    graph = build(args.packages)
    cycles = strongly_connected(graph)
    for line in describe(graph, cycles):
        print(line)
    print(f"import cycles in {', '.join(args.packages)}: {len(cycles)}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
