#!/bin/bash
# A two-node, MPI-style job as an sbatch user writes it: `srun` starts one task per node, as under sbatch.
#   slurmx submit --mode race examples/mpi_hostname.sh
# Every kind whose partition has two nodes gets a variant (a kind with one node is left out, with a note); the first
# to start runs. $SLURMD_NODENAME is the Slurm node of each task.
#SBATCH --job-name=mpi-hostname
#SBATCH --nodes=2 --ntasks-per-node=1
#SBATCH --time=5
srun bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS on $(hostname -s) (node $SLURMD_NODENAME), variant $SLURMX_VARIANT"'
