#!/usr/bin/env bash
# Modelled on the #SBATCH lines of a public NERSC fine-tuning script (found by content):
# a constraint with "&", a disabled "# #SBATCH" line, --gpus-per-task.

#SBATCH --job-name=sft-demo
#SBATCH --qos=regular
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1  # one task per node
#SBATCH --cpus-per-task=32
# #SBATCH --constraint=gpu
#SBATCH --constraint=gpu&hbm80g
#SBATCH --gpus-per-task=4
#SBATCH --account=m0000_g
#SBATCH --time=0-00:29:59
#SBATCH --output=./logs/slurm.%x.%j.out

srun python sft.py
