"""Rich tables of a run summary (what `fornax run` and the demo print)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from starfabric.units import format_bytes


def print_summary(console: Console, s: dict[str, Any], title: str = "fornax run") -> None:
    """Packets by final outcome, sessions, events, CPU by activity, software bytes."""
    p = s["packets"]
    console.print(f"[bold]{title}[/bold]")
    t = Table(title="packets by final outcome", title_justify="left")
    t.add_column("outcome")
    t.add_column("packets", justify="right")
    t.add_column("share", justify="right")
    total = max(int(p["offered"]), 1)
    for k in ("hw_forwarded", "sw_forwarded", "policy_drop", "named_drop"):
        t.add_row(k, f"{p[k]:,}", f"{100 * p[k] / total:.2f}%")
    for k, v in p["named_drop_reasons"].items():
        if v:
            t.add_row(f"  named: {k}", f"{v:,}", f"{100 * v / total:.2f}%")
    t.add_row("total", f"{p['offered']:,}", "100%", style="bold")
    console.print(t)

    conn = max(int(s["connections"]), 1)
    t2 = Table(title="sessions, events, management CPU", title_justify="left")
    t2.add_column("metric")
    t2.add_column("value", justify="right")
    t2.add_row("connections set up", f"{s['connections']:,}")
    t2.add_row("sessions in hardware / software",
               f"{s['sessions']['hardware']:,} / {s['sessions']['software']:,}")  # fmt: skip
    t2.add_row("SNAT ports held", f"{s['nat_allocated']:,}")
    for k, v in sorted(s["events"].items()):
        t2.add_row(f"events: {k}", f"{v:,}")
    for k, v in s["cpu_s_by_activity"].items():
        if v:
            t2.add_row(f"CPU {k}", f"{v * 1e3:.1f} ms ({1e6 * v / conn:.3f} ms/1k conn)")
    t2.add_row("management CPU total", f"{s['mgmt_cpu_s'] * 1e3:.1f} ms")
    t2.add_row("software datapath CPU", f"{s['softpath_cpu_s'] * 1e3:.1f} ms")
    t2.add_row("engine ops / connection", f"{s['engine_ops_per_connection']:.2f}")
    t2.add_row("manager software bytes",
               f"{format_bytes(s['software_bytes'])} "
               f"({s['software_bytes_per_peak_session']:.2f} B/session at the peak of "
               f"{s['peak_sessions']:,})")  # fmt: skip
    console.print(t2)


__all__ = ["print_summary"]
