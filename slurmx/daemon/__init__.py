"""slurmxd's parts that exist so far: the preemption protocol (`preemption`), shared by the daemon's enforce step
and the admin command `slurmx preempt` (`preempt_cli`), so that the two can never disagree on how a job is
signalled, given its grace and requeued. The control loop itself follows (roadmap issue 9).
"""
