"""What every reproduction report's claims must satisfy, whatever the paper: numbers beside the text, and a
verdict that follows from those numbers alone."""

from __future__ import annotations

import math

from slurmx.reproduce import Reproduction


def assert_machine_checkable(rep: Reproduction) -> None:
    """Every judged kind of claim carries a value and a band, its per-seed values match its seeds, and `holds` is
    what `judge()` computes from the numbers (or None: informational, or a quick run's band / ordering)."""
    for c in rep.claims:
        assert c.kind in ("band", "ordering", "bound", "info"), c
        if c.kind != "info":
            assert c.value is not None and c.band is not None, c.what
            assert c.unit, c.what
        if c.kind == "band":
            assert c.paper_value is not None and c.direction in ("lower", "higher", None), c.what
        assert c.holds is None or c.holds == c.judge(), c.what
        if c.per_seed:
            assert len(c.per_seed) == len(c.seeds), c.what
            assert (c.interval is None) == (len([v for v in c.per_seed if not math.isnan(v)]) < 2), c.what
        if rep.quick and c.kind in ("band", "ordering"):
            assert c.holds is None, c.what
