"""A click group whose commands from other packages are imported only when one of them runs.

`slurmx sim`, `reproduce` and `fidelity` pull in numpy, scipy and the simulator; importing them to print
`slurmx --help` or to run `slurmx submit` made every start cost most of a second. Each lazy command is
registered with a loader (a function holding the import, so the layout checks still see the edge) and the
one-line summary `--help` lists, which must match the command's own help (a unit test compares them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True, slots=True)
class LazyCommand:
    load: Callable[[], click.Command]
    summary: str  # the first paragraph of the command's help, as `--help` lists it

    def stand_in(self, name: str) -> click.Command:
        """A command that only carries the summary: enough for the group's listing."""
        return click.Command(name, help=self.summary)


class LazyGroup(click.Group):
    """`click.Group` plus commands that are imported on first lookup; the group's `--help` imports none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = {}

    def add_lazy(self, name: str, load: Callable[[], click.Command], summary: str) -> None:
        self.lazy[name] = LazyCommand(load, summary)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, over the loaded commands and stand-ins for the others."""
        shown = {name: self.commands.get(name) or self.lazy[name].stand_in(name) for name in self.list_commands(ctx)}
        click.Group(commands=shown).format_commands(ctx, formatter)
