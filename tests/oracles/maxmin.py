"""Slow, obvious max-min fairness: raise every unfrozen flow's rate together until a link fills."""

from __future__ import annotations


def maxmin_reference(paths: list[list[int]], cap: list[float]) -> list[float]:
    rate = [0.0] * len(paths)
    frozen = [len(p) == 0 for p in paths]
    for i, p in enumerate(paths):
        if not p:
            rate[i] = float("inf")
    left = list(cap)
    while not all(frozen):
        users = {
            link: [i for i, p in enumerate(paths) if not frozen[i] and link in p]
            for link in range(len(cap))
        }
        shares = {link: left[link] / len(us) for link, us in users.items() if us}
        inc = min(shares.values())
        for i, p in enumerate(paths):
            if not frozen[i]:
                rate[i] += inc
                for link in set(p):
                    left[link] -= inc * p.count(link)
        for link, share in shares.items():
            if abs(share - inc) <= 1e-12 * max(1.0, abs(inc)):
                for i in users[link]:
                    frozen[i] = True
    return rate
