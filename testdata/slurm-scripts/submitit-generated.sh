#!/bin/bash
# The shape submitit (facebookincubator/submitit, submitit/slurm/slurm.py,
# _make_sbatch_string) writes: "# Parameters", the #SBATCH lines sorted by name, then
# "# command" and an srun of submitit's runner. Paths and values are ours.

# Parameters
#SBATCH --array=0-15%4
#SBATCH --cpus-per-task=10
#SBATCH --error=/home/alice/exp/logs/%A_%a_0_log.err
#SBATCH --gpus-per-node=8
#SBATCH --job-name=submitit
#SBATCH --mem=400GB
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --open-mode=append
#SBATCH --output=/home/alice/exp/logs/%A_%a_0_log.out
#SBATCH --signal=USR2@90
#SBATCH --time=60
#SBATCH --wckey=submitit

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /home/alice/exp/logs/%A_%a_%t_log.out --error /home/alice/exp/logs/%A_%a_%t_log.err python -u -m submitit.core._submit /home/alice/exp/logs
