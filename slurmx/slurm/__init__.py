"""Everything that talks to Slurm: transports, the adapter protocol, parsers across Slurm versions."""

from slurmx.slurm.adapter import CliSlurm, JobUpdate, RetryPolicy, SlurmAdapter
from slurmx.slurm.errors import (
    InvalidJobError,
    SlurmCommandError,
    SlurmError,
    SlurmParseError,
    SlurmTimeout,
    SlurmUnavailable,
    TransportError,
)
from slurmx.slurm.factory import adapter_from_config, transport_from_config
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = [
    "AccountingRecord",
    "CliSlurm",
    "InvalidJobError",
    "JobUpdate",
    "RetryPolicy",
    "SlurmAdapter",
    "SlurmCommandError",
    "SlurmError",
    "SlurmJob",
    "SlurmParseError",
    "SlurmTimeout",
    "SlurmUnavailable",
    "TransportError",
    "adapter_from_config",
    "transport_from_config",
]
