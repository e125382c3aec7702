"""Settings shared by every test directory.

Hypothesis' per-example deadline is off: tests assert behaviour, never speed (performance lives in bench/), and
`make test` runs the unit tests while the cluster images build in the background on the same cores.
"""

from hypothesis import settings

settings.register_profile("slurmx", deadline=None)
settings.load_profile("slurmx")
