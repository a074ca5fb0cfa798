#!/bin/bash
# Modelled on the #SBATCH lines of chaotic-aur/toolbox slurm-jobs/ufscar-hpc/hourly.1.sh:
# an hourly job that must never overlap itself, a signal named with its SIG prefix.
#SBATCH --job-name=hourly.1
#SBATCH --mincpus 40
#SBATCH --exclusive
#SBATCH --mem 0
#SBATCH --partition fast
#SBATCH --nodes 1
#SBATCH --dependency=singleton
#SBATCH --time=00:50:00
#SBATCH --signal=B:SIGUSR1@90

source common.sh
