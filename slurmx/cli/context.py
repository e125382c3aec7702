"""The `slurmx` command group's context: the site config and the Slurm adapter, read once per command.

Its own module so the command modules (`slurmx preempt`, `slurmx sim sweep`) can build one without importing
`slurmx.cli.app`, which imports them when one of them runs. The site config and
the adapter are imported when first asked for: `slurmx --help` builds a Context and must stay quick.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from slurmx.core.config import SiteConfig
    from slurmx.slurm import SlurmAdapter

__all__ = ["DEFAULT_SITE", "Context", "site_path_or_default"]

DEFAULT_SITE = "/etc/slurmx/site.yaml"


def site_path_or_default(site_path: str | None) -> str:
    """`--site`, else $SLURMX_SITE, else the system-wide default."""
    return site_path or os.environ.get("SLURMX_SITE") or DEFAULT_SITE


@dataclass
class Context:
    site_path: str | None
    container: str | None
    host: str | None = None
    # Read once per command: several commands need both the site and the adapter (and an SSH adapter would
    # otherwise open a new connection each time it is asked for).
    _site: SiteConfig | None = field(default=None, init=False, repr=False)
    _adapter: SlurmAdapter | None = field(default=None, init=False, repr=False)

    def site(self) -> SiteConfig:
        if self._site is None:
            self._site = self._load_site()
        return self._site

    def adapter(self) -> SlurmAdapter:
        if self._adapter is None:
            from slurmx.slurm import adapter_from_config

            self._adapter = adapter_from_config(self.site().transport)
        return self._adapter

    def _load_site(self) -> SiteConfig:
        from slurmx.core.config import load_site_config

        site = load_site_config(site_path_or_default(self.site_path))
        update: dict[str, Any] = {}
        if self.container:
            update = {"kind": "docker", "container": self.container}
        if self.host:
            user, _, hostport = self.host.rpartition("@")
            host, _, port = hostport.partition(":")
            if not host or (port and not port.isdigit()):
                raise click.BadParameter(f"expected [USER@]HOST[:PORT], got {self.host!r}", param_hint="--host")
            update = {"kind": "ssh", "host": host, "user": user or None, "port": int(port or 22)}
        if update:
            site = site.model_copy(update={"transport": site.transport.model_copy(update=update)})
        return site
