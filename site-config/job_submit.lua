--[[
slurmx: only slurmxd may change a job that carries a slurmx tag (docs/failsafe.md, "The site guard").

`slurmx submit` tags each variant it submits with a `slurmx:` comment and each profiling sample with a
`slurmx-sample:` comment; slurmxd schedules by those tags (managed variants wait under a lease, `l=` in the tag,
until slurmxd starts one; samples wait held until slurmxd releases them). This plugin keeps users from undoing
that policy after submission:

  * a job whose comment starts with `slurmx:` or `slurmx-sample:` may be changed by its owner only in the ways
    slurmx itself changes it as that user (USER_MAY below: a sample appends what it measured to its comment);
    every other field an update carries is refused with one line naming it. A whitelist, not a blacklist: each
    field Slurm's bindings expose (SLURM_FIELDS, Slurm 22.05 to 26.05) counts as a change unless it holds the
    value `scontrol update` sends for a field it leaves alone;
  * no user may set a comment starting with `slurmx` on any job after submission (a tag is written by
    `slurmx submit` only);
  * no job may use the profiling QOS except a held sample.

Root, SlurmUser and the uids below (the account slurmxd runs as) may do anything. A user may always cancel.

Install: copy to the folder of slurm.conf, set `JobSubmitPlugins=lua` there (keep any plugins already listed,
e.g. `JobSubmitPlugins=lua,require_timelimit`; a site that already has a job_submit.lua merges the two functions
below into its own), then `scontrol reconfigure`. `slurmx doctor` checks that it is active.
--]]

-- uid => true for every account allowed to change tagged jobs besides root: SlurmUser and slurmxd's own account.
local SLURMX_DAEMON_UIDS = {
  [0] = true,
}

-- The profiling QOS (profile.sampling.qos in the site config; slurmx's default below).
local SLURMX_PROFILE_QOS = "slurmx-profile"

local NO_VAL16 = 65534
local NO_VAL = 4294967294
local NO_VAL64 = 18446744073709551614.0  -- as the bindings hand it over: a double (2^64)
local S = "string"                       -- a string field: unset when nil

-- bitflags: the client sets USE_DEFAULT_ACCT, _PART, _QOS and _WCKEY (bits 25 to 28, the same in 22.05 to 26.05)
-- on every request that names no account, partition, QOS or WCKey (_pack_job_desc_msg); any other bit is a change.
-- Arithmetic, not bit operators: Lua 5.1 has none, and the bindings hand the 64 bits over as a double.
local function only_default_bits(value)
  for bit = 25, 28 do
    if math.floor(value / 2 ^ bit) % 2 == 1 then
      value = value - 2 ^ bit
    end
  end
  return value == 0
end

-- Every field of job_desc Slurm's lua bindings expose (22.05, 24.11, 26.05: _get_job_req_field in
-- src/plugins/job_submit/lua/job_submit_lua.c), with the value it holds when an update leaves it alone
-- (slurm_init_job_desc_msg; or a function saying whether a value is unset) and what `scontrol update` calls it.
-- A field absent from a release reads nil: unset.
local SLURM_FIELDS = {
  {"account", S, "Account"}, {"acctg_freq", S}, {"admin_comment", S, "AdminComment"}, {"argc", 0},
  {"array_inx", S, "ArrayTaskThrottle"}, {"batch_features", S}, {"begin_time", 0, "StartTime"},
  {"bitflags", only_default_bits},
  {"boards_per_node", 0}, {"burst_buffer", S, "BurstBuffer"}, {"clusters", S, "Clusters"}, {"comment", S, "Comment"},
  {"container", S}, {"contiguous", NO_VAL16, "Contiguous"}, {"core_spec", NO_VAL16, "CoreSpec"},
  {"cores_per_socket", NO_VAL16, "CoresPerSocket"}, {"cpu_freq_gov", NO_VAL}, {"cpu_freq_max", NO_VAL},
  {"cpu_freq_min", NO_VAL}, {"cpus_per_task", NO_VAL16, "CPUsPerTask"}, {"cpus_per_tres", S, "CpusPerTres"},
  {"delay_boot", NO_VAL, "DelayBoot"}, {"dependency", S, "Dependency"}, {"end_time", 0, "EndTime"},
  {"exc_nodes", S, "ExcNodeList"}, {"extra", S, "Extra"}, {"features", S, "Features"},
  {"het_job_offset", 0}, {"immediate", 0}, {"licenses", S, "Licenses"}, {"mail_type", NO_VAL16, "MailType"},
  {"mail_user", S, "MailUser"}, {"max_cpus", NO_VAL, "NumCPUs"}, {"max_nodes", NO_VAL, "NumNodes"},
  {"mcs_label", S}, {"mem_per_tres", S, "MemPerTres"}, {"min_cpus", NO_VAL, "NumCPUs"},
  {"min_nodes", NO_VAL, "NumNodes"}, {"name", S, "Name"}, {"network", S}, {"nice", NO_VAL, "Nice"},
  {"ntasks_per_board", 0}, {"ntasks_per_core", NO_VAL16}, {"ntasks_per_node", NO_VAL16, "NumTasksPerNode"},
  {"ntasks_per_socket", NO_VAL16}, {"ntasks_per_tres", NO_VAL16}, {"num_tasks", NO_VAL, "NumTasks"},
  {"partition", S, "Partition"}, {"pn_min_cpus", NO_VAL16, "MinCPUsNode"},
  {"pn_min_memory", NO_VAL64, "MinMemoryNode/MinMemoryCPU"}, {"pn_min_tmp_disk", NO_VAL, "MinTmpDiskNode"},
  {"power_flags", 0}, {"prefer", S, "Prefer"}, {"priority", NO_VAL, "Priority/hold/release"},
  {"qos", S, "QOS"}, {"reboot", NO_VAL16, "Reboot"}, {"req_context", S}, {"req_nodes", S, "ReqNodeList"},
  {"req_switch", NO_VAL, "Switches"}, {"requeue", NO_VAL16, "Requeue"}, {"reservation", S, "Reservation"},
  {"script", S}, {"segment_size", 0}, {"selinux_context", S}, {"shared", NO_VAL16, "OverSubscribe"},
  {"site_factor", NO_VAL, "SiteFactor"}, {"sockets_per_board", 0}, {"sockets_per_node", NO_VAL16},
  {"spank_job_env_size", 0}, {"std_err", S, "StdErr"}, {"std_in", S, "StdIn"}, {"std_out", S, "StdOut"},
  {"thread_spec", NO_VAL16, "ThreadSpec"}, {"threads_per_core", NO_VAL16, "ReqThreads"},
  {"time_limit", NO_VAL, "TimeLimit"}, {"time_min", NO_VAL, "TimeMin"}, {"tres_bind", S, "TresBind"},
  {"tres_freq", S, "TresFreq"}, {"tres_per_job", S, "TresPerJob"}, {"tres_per_node", S, "Gres/TresPerNode"},
  {"tres_per_socket", S, "TresPerSocket"}, {"tres_per_task", S, "TresPerTask"},
  {"wait4switch", NO_VAL, "Switches"}, {"wckey", S, "WCKey"}, {"work_dir", S, "WorkDir"},
}

-- Names the bindings also answer that are no change an update asks for: who asks and from where (set by
-- slurmctld), values derived from the association or from a field above, and other names of fields above.
local NOT_A_CHANGE = {
  alloc_node = true, user_id = true, group_id = true, user_name = true, assoc_comment = true, assoc_qos = true,
  default_account = true, default_qos = true, cron_job = true, environment = true, argv = true,
  spank_job_env = true, gres = true, oversubscribe = true, pack_job_offset = true, ntasks_per_gpu = true,
  min_mem_per_node = true, min_mem_per_cpu = true,
}

local KNOWN = {}
for _, field in ipairs(SLURM_FIELDS) do
  KNOWN[field[1]] = field
end

--[[ The tag grammar: the one slurmx/core/tag.py reads (both are tested against tests/fixtures/tag_grammar.json).
`slurmx:1:k=v,k=v,...` (or, from before versions, `slurmx:k=v,...`): at most 1024 characters; each key once,
from the table below; g= and v= present; no spaces, no empty values, ASCII only. --]]
local TAG_MAX = 1024
local NAME_MAX = 81

local function plain_name(text)
  return #text <= NAME_MAX and string.find(text, "^[A-Za-z0-9][A-Za-z0-9_.%-]*$") ~= nil
end

local function whole_number(text)
  return #text <= 18 and string.find(text, "^[0-9]+$") ~= nil
end

local function seconds(text)  -- [0-9]{1,18}(.[0-9]{1,18})?([eE][+-]?[0-9]{1,3})?, positive and finite
  local mantissa, exponent = string.match(text, "^([0-9.]+)[eE][+-]?([0-9]+)$")
  if mantissa == nil then
    mantissa = text
  elseif #exponent > 3 then
    return false
  end
  local whole, fraction = string.match(mantissa, "^([0-9]+)%.([0-9]+)$")
  if whole == nil then
    whole, fraction = string.match(mantissa, "^([0-9]+)$"), ""
  end
  if whole == nil or #whole > 18 or #fraction > 18 then
    return false
  end
  local value = tonumber(text)
  return value ~= nil and value > 0 and value < math.huge
end

local function job_class(text)
  return text == "te" or text == "be"
end

local TAG_KEYS = {g = plain_name, v = plain_name, c = job_class, gr = whole_number, e = seconds, n = whole_number,
                  h = plain_name, p = plain_name, l = whole_number, b = whole_number}

-- What a comment says: {tagged, valid, leased, sample, why}. `tagged`: starts like a variant's tag (the guard
-- protects it, readable or not); `valid`: slurmxd reads it; `sample`: a profiling sample's comment.
function slurmx_read_tag(comment)
  local reading = {tagged = false, valid = false, leased = false, sample = false, why = nil}
  if comment == nil then
    return reading
  end
  reading.sample = string.sub(comment, 1, 14) == "slurmx-sample:"
  if string.sub(comment, 1, 7) ~= "slurmx:" then
    return reading
  end
  reading.tagged = true
  if #comment > TAG_MAX then
    reading.why = "longer than " .. TAG_MAX .. " characters"
    return reading
  end
  local body = string.sub(comment, 8)
  local version, rest = string.match(body, "^([0-9]+):(.*)$")
  if version == "1" then
    body = rest
  elseif version ~= nil then
    reading.why = "tag version " .. version .. " is not one this plugin reads (0 or 1)"
    return reading
  end
  local found = {}
  for item in string.gmatch(body .. ",", "([^,]*),") do
    local key, value = string.match(item, "^([^=]*)=(.*)$")
    local check = key and TAG_KEYS[key]
    if check == nil then
      reading.why = "field " .. string.sub(item, 1, 40) .. " is not one of g v c gr e n h p l b"
      return reading
    elseif found[key] ~= nil then
      reading.why = key .. "= given twice"
      return reading
    elseif not check(value) then
      reading.why = key .. "=" .. string.sub(value, 1, 40) .. " is not a valid value"
      return reading
    end
    found[key] = value
  end
  if found.g == nil or found.v == nil then
    reading.why = "without g=<group> and v=<kind>"
    return reading
  end
  reading.valid, reading.leased = true, found.l ~= nil
  return reading
end

local function guarded(comment)
  local reading = slurmx_read_tag(comment)
  return reading.tagged or reading.sample, reading
end

-- A comment anyone could take for a tag: set by `slurmx submit` only.
local function looks_like_a_tag(comment)
  return comment ~= nil and string.find(comment, "^[%s%c]*[Ss][Ll][Uu][Rr][Mm][Xx][:%-]") ~= nil
end

-- The fields a sample may append to its own comment when it ends (slurmx/hooks/sample.py: t, ps;
-- slurmx/hooks/search.py: w, k), each once; its own fields stay as they are.
local SAMPLE_REPORT_KEYS = {t = true, ps = true, w = true, k = true}

local function sample_report(new, old)
  if old == nil or string.sub(new, 1, #old) ~= old then
    return "its Comment (comment) except by appending to it"
  end
  local added = string.sub(new, #old + 1)
  if #new > 4096 or string.find(added, "^,[^,]") == nil then
    return "its Comment (comment) except by appending ,<field>=<value> to it"
  end
  local present = {}
  for key in string.gmatch(old, "[:,]([^=,]*)=") do
    present[key] = true
  end
  for item in string.gmatch(string.sub(added, 2) .. ",", "([^,]*),") do
    local key, value = string.match(item, "^([a-z]+)=([0-9A-Za-z.:;+%-]+)$")
    if key == nil or not SAMPLE_REPORT_KEYS[key] or present[key] then
      return "its Comment (comment) except by appending t=, ps=, w= or k= once"
    end
    present[key] = true
  end
  return nil
end

-- What the owner of a tagged job may change: what slurmx does as that user, nothing else.
-- field => function(new value, job_rec, reading) returning nil when allowed, else what is refused.
local USER_MAY = {
  -- MailType=NONE only: the variant that runs silences the siblings it cancels (templates/_base.sh.j2), so only
  -- it mails (Slurm mails END for a cancelled job too). Silencing gives nothing a user could use against slurmxd.
  mail_type = function(value)
    if value ~= 0 then
      return "its MailType (mail_type) except to NONE"
    end
    return nil
  end,
  comment = function(value, job_rec, reading)
    if not reading.sample then
      return "its Comment (comment), the slurmx tag"
    end
    return sample_report(value, job_rec.comment)
  end,
}

local function is_set(value, unset)
  if value == nil then
    return false
  end
  if unset == S then
    return true
  elseif type(unset) == "function" then
    return not unset(value)
  end
  return value ~= unset
end

-- Every change `job_desc` asks for on a tagged job that its owner may not make, as one phrase; nil: none.
local function refused_changes(job_desc, job_rec, reading)
  local refused = {}
  for _, field in ipairs(SLURM_FIELDS) do
    local name, unset, label = field[1], field[2], field[3]
    local value = job_desc[name]
    if is_set(value, unset) then
      local check = USER_MAY[name]
      local why = check and check(value, job_rec, reading)
      if check == nil then
        table.insert(refused, "its " .. (label and (label .. " (" .. name .. ")") or name))
      elseif why ~= nil then
        table.insert(refused, why)
      end
    end
  end
  -- A job_desc the bindings hand over as a plain table can be listed: a field this plugin does not know (a newer
  -- Slurm's) is refused too. slurmctld's own job_desc cannot be listed (its fields come from a metatable).
  for name, value in pairs(job_desc) do
    if KNOWN[name] == nil and not NOT_A_CHANGE[name] and value ~= nil then
      table.insert(refused, "its " .. tostring(name) .. " (a field this plugin does not know)")
    end
  end
  if #refused == 0 then
    return nil
  end
  return table.concat(refused, ", ")
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if SLURMX_DAEMON_UIDS[submit_uid] or job_desc.qos ~= SLURMX_PROFILE_QOS then
    return slurm.SUCCESS
  end
  if job_desc.priority == 0 and slurmx_read_tag(job_desc.comment).sample then
    return slurm.SUCCESS  -- a held sample, for slurmxd to release
  end
  slurm.log_user(string.format("slurmx: QOS %s is for profiling samples that slurmxd releases; submit with " ..
                               "another QOS", SLURMX_PROFILE_QOS))
  return slurm.ERROR
end

local function refuse(modify_uid, job_id, what, why)
  slurm.log_info("slurmx: refused uid %d changing %s of job %d", modify_uid, what, job_id)
  slurm.log_user(string.format("slurmx: job %d %s: only slurmxd may change %s", job_id, why, what))
  return slurm.ERROR
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if SLURMX_DAEMON_UIDS[modify_uid] then
    return slurm.SUCCESS
  end
  local job_id = job_rec.job_id or 0
  local protected, reading = guarded(job_rec.comment)
  if protected then
    local what = refused_changes(job_desc, job_rec, reading)
    if what == nil then
      return slurm.SUCCESS
    elseif reading.sample then
      return refuse(modify_uid, job_id, what, "is a profiling sample (scancel it if you do not want it)")
    elseif reading.leased then
      return refuse(modify_uid, job_id, what, "is a managed variant waiting for slurmxd (cancel the group " ..
                                              "with `slurmx cancel`, or submit with --mode race)")
    end
    return refuse(modify_uid, job_id, what, "carries a slurmx tag (cancel the group with `slurmx cancel` and " ..
                                            "submit again)")
  end
  if looks_like_a_tag(job_desc.comment) then
    slurm.log_info("slurmx: refused uid %d setting a slurmx tag as the comment of job %d", modify_uid, job_id)
    slurm.log_user(string.format("slurmx: job %d: refused its Comment (comment): a comment starting with " ..
                                 "slurmx is a slurmx tag, which only `slurmx submit` writes; choose another", job_id))
    return slurm.ERROR
  end
  if job_desc.qos == SLURMX_PROFILE_QOS then
    slurm.log_user(string.format("slurmx: QOS %s is for profiling samples that slurmxd releases",
                                 SLURMX_PROFILE_QOS))
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
