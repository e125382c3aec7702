"""A stand-in for slurmctld's job_submit/lua bindings, to run the real site-config/job_submit.lua in unit tests.

It is not Slurm: the `slurm` table has only what the plugin uses (SUCCESS, ERROR, log_user, log_info), and job_rec
is a plain table. job_desc is built the way the bindings build it for an update: an empty table whose metatable
answers each field by name, from the C struct `scontrol update` sends (every member at its
`slurm_init_job_desc_msg` value unless the update sets it, plus the USE_DEFAULT_* bits the client's
_pack_job_desc_msg adds to bitflags for each of account, partition, QOS and WCKey it does not name), per Slurm
release, as transcribed from Slurm's source in tests/fixtures/slurm_job_desc.json. The live tests
(tests/integration/test_security_live.py and test_failsafe_live.py) run the same plugin under the real bindings.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmx.slurm.versions import TESTED

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "site-config" / "job_submit.lua"
JOB_DESC = json.loads((ROOT / "tests" / "fixtures" / "slurm_job_desc.json").read_text())
RELEASES = TESTED
LUA_VERSIONS = ("lua51", "lua52", "lua53", "lua54", "luajit21")  # Slurm links whichever the site built with
_CONSTANTS = {"NO_VAL8": 254, "NO_VAL16": 65534, "NO_VAL": 4294967294, "NO_VAL64": 2**64 - 2,
              "SLURM_AUTH_NOBODY": 99}

_STANDIN = r"""
slurm = {SUCCESS = 0, ERROR = -1, user_lines = {}, info_lines = {}}
function slurm.log_user(fmt, ...) table.insert(slurm.user_lines, string.format(fmt, ...)) end
function slurm.log_info(fmt, ...) table.insert(slurm.info_lines, string.format(fmt, ...)) end
function standin_read_tag(comment)  -- `why` with bytes above 127 masked: a cut may split a character
  local r = slurmx_read_tag(comment)
  return {tagged = r.tagged, valid = r.valid, leased = r.leased, sample = r.sample,
          why = r.why and (string.gsub(r.why, "[\128-\255]", "?"))}
end
function standin_job_desc(lookup)
  return setmetatable({}, {__index = function(_, name) return lookup(name) end})
end
"""


@dataclass
class Outcome:
    """What one call of the plugin returned and told the user."""

    rc: int
    user_lines: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return self.rc == 0


class Guard:
    """site-config/job_submit.lua loaded into one Lua runtime (`lua_version`: a lupa module name)."""

    def __init__(self, lua_version: str = "lua54", source: str | None = None, daemon_uid: int | None = 2100) -> None:
        if source is None:  # slurmxd's own account added the way a site adds it (as docker-slurm/cluster does)
            source = PLUGIN.read_text()
            if daemon_uid is not None:
                source = source.replace("  [0] = true,\n", f"  [0] = true,\n  [{daemon_uid}] = true,\n", 1)
        runtime = importlib.import_module(f"lupa.{lua_version}").LuaRuntime(unpack_returned_tuples=True)
        self.lua = runtime
        runtime.execute(_STANDIN)
        loaded = runtime.execute(source)
        assert loaded == 0, f"the plugin returned {loaded!r} when loaded"
        self.g = runtime.globals()

    def read_tag(self, comment: str | None) -> dict[str, Any]:
        reading = self.g.standin_read_tag(comment)
        return {key: reading[key] for key in ("tagged", "valid", "leased", "sample", "why")}

    def _outcome(self, rc: Any) -> Outcome:
        lines = list(self.g.slurm.user_lines.values())
        self.g.slurm.user_lines = self.lua.table()
        return Outcome(int(rc), lines)

    def table(self, values: dict[str, Any]) -> Any:
        return self.lua.table_from({k: v for k, v in values.items() if v is not None})

    def modify(self, job_desc: Any, job_rec: dict[str, Any], uid: int) -> Outcome:
        rec = self.table(job_rec)
        desc = self.table(job_desc) if isinstance(job_desc, dict) else job_desc
        return self._outcome(self.g.slurm_job_modify(desc, rec, self.lua.table(), float(uid)))

    def submit(self, job_desc: dict[str, Any], uid: int) -> Outcome:
        return self._outcome(self.g.slurm_job_submit(self.table(job_desc), self.lua.table(), float(uid)))

    def update(self, release: str, owner_uid: int = 2002, **members: Any) -> Any:
        """The job_desc slurmctld hands the plugin for an `scontrol update` of `release` that sets `members`
        (C member names of job_desc_msg_t)."""
        spec = JOB_DESC[release]
        values: dict[str, Any] = {m: _CONSTANTS.get(v) for m, v in spec["defaults"].items()}
        values["user_id"] = owner_uid  # slurmctld fills in the job's owner before the plugin runs
        values["alloc_node"] = "login"  # and the host the request came from
        unknown = set(members) - {f["member"] for f in spec["fields"].values() if "member" in f}
        assert not unknown, f"Slurm {release} exposes no {sorted(unknown)}"
        values.update(members)
        for bit, member in ((25, "account"), (26, "partition"), (27, "qos"), (28, "wckey")):
            if values.get(member) is None:  # what the client's _pack_job_desc_msg adds: USE_DEFAULT_<member>
                values["bitflags"] = (values.get("bitflags") or 0) | 1 << bit
        derived = {"environment": self.lua.table(), "user_name": "bob", "default_account": "research",
                   "default_qos": "normal", "assoc_qos": "normal", "cron_job": False}

        def lookup(name: str) -> Any:
            info = spec["fields"].get(name)
            if info is None:
                return None  # a name the release does not know
            if info["type"] == "derived":
                return derived.get(name)
            value = values.get(info["member"], None if info["type"] == "string" else 0)
            if info["type"] == "string" or value is None:
                return value
            if info.get("only_when_set") and value in (_CONSTANTS["NO_VAL64"], _CONSTANTS["NO_VAL16"]):
                return None
            return float(value)  # lua_pushnumber: a double, as Slurm hands every number over

        return self.g.standin_job_desc(lookup)


def exposed_members(release: str) -> dict[str, str]:
    """C member => its type, for every member `release`'s bindings expose (derived values left out)."""
    return {f["member"]: f["type"] for f in JOB_DESC[release]["fields"].values() if "member" in f}
