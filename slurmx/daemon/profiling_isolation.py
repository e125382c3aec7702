"""Per-group isolation inside the profiling stage: one group's data that raises sets that group aside, not the cycle.

Every sub-stage of `ProfilingStage.cycle` (history, registration, samples, searches, clean-up, progress, estimates,
the view) runs each group's part under `isolation.group(gid, stage)`. An exception there (a file the user shaped to
break a parser, a bug only that group's numbers reach) is audited against the group as one line, the group leaves
profiling (it keeps its declared estimates, and the policy sees it as if profiling were off) and the stage goes on
for the others. `SlurmError` and `DaemonError` (the watchdog's `CycleTimeout`) still propagate: Slurm being gone is
not one group's fault, and the daemon must back off. A set-aside group is remembered only while it is in the
queue (`keep_only`), so the memory is bounded by the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from slurmx.daemon.errors import DaemonError
from slurmx.slurm import SlurmError

__all__ = ["Isolation"]

log = logging.getLogger("slurmxd")

Audit = Callable[[str, str, str], None]  # (group, event, detail)
_MAX_CAUSE = 200


class Isolation:
    """The groups set aside from profiling (group -> the one line why); `forget` drops a group's profiling state."""

    def __init__(self, audit: Audit, forget: Callable[[str], None]) -> None:
        self.audit = audit
        self.forget = forget
        self.aside: dict[str, str] = {}

    def __contains__(self, group_id: object) -> bool:
        return group_id in self.aside

    @contextmanager
    def group(self, group_id: str, stage: str) -> Iterator[None]:
        """Run one group's part of `stage`; what it raises (but Slurm's and the daemon's own errors) sets the
        group aside."""
        try:
            yield
        except (SlurmError, DaemonError):
            raise
        except Exception as exc:  # the point: any failure of one group's data stays that group's
            self.set_aside(group_id, stage, exc)

    def set_aside(self, group_id: str, stage: str, exc: BaseException) -> None:
        """Take the group out of profiling, once, with the cause in one line (`slurmx explain`)."""
        if group_id in self.aside:
            return
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())
        cause = cause if len(cause) <= _MAX_CAUSE else cause[:_MAX_CAUSE - 3] + "..."
        self.aside[group_id] = cause
        log.warning("profiling: group %s set aside (%s: %s); it keeps its declared estimates", group_id, stage,
                    cause, extra={"group": group_id, "event": "profile"})
        log.debug("profiling: group %s set aside", group_id, exc_info=exc)
        self.forget(group_id)
        self.audit(group_id, "error", f"set aside from profiling ({stage}: {cause}); the group keeps its declared "
                   "estimates")

    def keep_only(self, group_ids: Collection[str]) -> None:
        """Forget the set-aside groups that left the queue."""
        self.aside = {g: why for g, why in self.aside.items() if g in group_ids}
