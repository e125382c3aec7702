"""`python -m slurmx.cli ...` runs `slurmx ...` (the demo and the live tests call it so, without the console script)."""

from slurmx.cli.app import main

main()
