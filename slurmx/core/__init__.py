"""Domain model shared by every part of slurmx: pure data, no I/O."""
