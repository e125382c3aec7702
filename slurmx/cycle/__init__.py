"""The one decision cycle: observe -> `policy.schedule(view, now)` -> apply, for the daemon and the simulator alike.

`decide` is the only place a policy is consulted. A `Backend` is what differs: slurmxd's observes Slurm and
enforces with `scontrol` (`slurmx.daemon.backend`), the engine's observes and changes its model cluster
(`slurmx.sim.engine`). Both apply a plan's actions in the one order `effect_order` defines, through a table from
action type to handler that is checked complete when the backend is built, and both write the same
`DecisionRecord`s, so a parity test can compare what they did action by action. A group whose data makes the
policy raise is set aside and the others decided without it (`isolate`), the same way for both.
"""

from slurmx.cycle.backend import Backend, Handler, HandlerTable, checked_handlers
from slurmx.cycle.isolate import Quarantine
from slurmx.cycle.log import DecisionLog, DecisionRecord, Outcome, view_digest
from slurmx.cycle.order import effect_order
from slurmx.cycle.run import Decision, decide

__all__ = ["Backend", "Decision", "DecisionLog", "DecisionRecord", "Handler", "HandlerTable", "Outcome",
           "Quarantine", "checked_handlers", "decide", "effect_order", "view_digest"]
