--[[
slurmx: only slurmxd may move what keeps a managed variant waiting (docs/failsafe.md).

`slurmx submit` (managed mode) submits each variant with `--begin=now+<lease>` and `l=<lease>` in its comment tag;
slurmxd keeps pushing that begin time forward and, for the variant its policy chooses, sets it to now. If slurmxd is
gone, the lease runs out and Slurm runs the group by itself (one variant: the job-side guard). This plugin makes the
lease the daemon's alone: a job's owner may not move a leased variant's begin time (StartTime), hold or release it,
change its priority or rewrite its comment. Root, SlurmUser and the uids below (the account slurmxd runs as) may.

Profiling samples (`slurmx-sample:` comments) are queued held by the user's own `slurmx submit`; slurmxd releases
those its profiler wants. Their owner may not release them or move their begin time, may only append to their
comment (a sample reports its timing there), and no job may use the profiling QOS except such a held sample.

Install: copy to the folder of slurm.conf, set `JobSubmitPlugins=lua` there (keep any plugins already listed,
e.g. `JobSubmitPlugins=lua,require_timelimit`; a site that already has a job_submit.lua merges the two functions
below into its own), then `scontrol reconfigure`. `slurmx doctor` checks that it is active.
--]]

-- uid => true for every account allowed to move leases besides root: SlurmUser and slurmxd's own account.
local SLURMX_DAEMON_UIDS = {
  [0] = true,
}

-- The profiling QOS (profile.sampling.qos in the site config; slurmx's default below).
local SLURMX_PROFILE_QOS = "slurmx-profile"

local NO_VAL = 4294967294  -- "not being changed" for a 32-bit field of an update

local function leased(comment)
  return comment ~= nil and string.find(comment, "^slurmx:") ~= nil and string.find(comment, ",l=%d") ~= nil
end

local function sample(comment)
  return comment ~= nil and string.find(comment, "^slurmx%-sample:") ~= nil
end

local function refused_change(job_desc)
  if job_desc.begin_time ~= nil and job_desc.begin_time ~= 0 then
    return "its begin time (StartTime)"
  end
  if job_desc.priority ~= nil and job_desc.priority ~= NO_VAL then
    return "its hold or priority"
  end
  if job_desc.comment ~= nil then
    return "its comment (the slurmx tag)"
  end
  return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if SLURMX_DAEMON_UIDS[submit_uid] or job_desc.qos ~= SLURMX_PROFILE_QOS then
    return slurm.SUCCESS
  end
  if job_desc.priority == 0 and sample(job_desc.comment) then
    return slurm.SUCCESS  -- a held sample, for slurmxd to release
  end
  slurm.log_user(string.format("slurmx: QOS %s is for profiling samples that slurmxd releases; submit with " ..
                               "another QOS", SLURMX_PROFILE_QOS))
  return slurm.ERROR
end

local function sample_change(job_desc, job_rec)
  if job_desc.qos ~= nil and job_desc.qos ~= job_rec.qos then
    return "its QOS"
  end
  if job_desc.comment ~= nil and string.sub(job_desc.comment, 1, #job_rec.comment) ~= job_rec.comment then
    return "its comment except by appending to it"
  end
  local what = refused_change(job_desc)
  if what == "its comment (the slurmx tag)" then
    return nil
  end
  return what
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if SLURMX_DAEMON_UIDS[modify_uid] then
    return slurm.SUCCESS
  end
  if job_desc.qos == SLURMX_PROFILE_QOS and not sample(job_rec.comment) then
    slurm.log_user(string.format("slurmx: QOS %s is for profiling samples that slurmxd releases",
                                 SLURMX_PROFILE_QOS))
    return slurm.ERROR
  end
  if sample(job_rec.comment) then
    local change = sample_change(job_desc, job_rec)
    if change == nil then
      return slurm.SUCCESS
    end
    slurm.log_info("slurmx: refused uid %d changing %s of profiling sample %d", modify_uid, change, job_rec.job_id)
    slurm.log_user(string.format("slurmx: job %d is a profiling sample: only slurmxd may change %s " ..
                                 "(scancel it if you do not want it)", job_rec.job_id, change))
    return slurm.ERROR
  end
  if not leased(job_rec.comment) then
    return slurm.SUCCESS
  end
  local what = refused_change(job_desc)
  if what == nil then
    return slurm.SUCCESS
  end
  slurm.log_info("slurmx: refused uid %d changing %s of managed variant %d", modify_uid, what, job_rec.job_id)
  slurm.log_user(string.format("slurmx: job %d is a managed variant: only slurmxd may change %s " ..
                               "(cancel the group with `slurmx cancel`, or submit with --mode race)",
                               job_rec.job_id, what))
  return slurm.ERROR
end

return slurm.SUCCESS
