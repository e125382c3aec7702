"""slurmxd: the control loop that makes a policy real on Slurm.

`loop` (observe -> reconcile -> decide -> enforce -> record), `observe` (the view from Slurm and the store),
`trust` (which jobs may be acted on), `enforce` (actions as crash-safe intents), `store` (SQLite, WAL),
`preemption` (the grace protocol, shared with `slurmx preempt`), `checks` (operator and coexistence),
`metrics` (Prometheus), `explain` (the audit log read back), `main` (start-up).
"""
