#!/bin/bash
# Modelled on the #SBATCH lines of gaurikadiwan/pytorch slurm.sh: an empty "#SBATCH" and
# its option on the next line, which is a command to the shell, so directives end there.
#SBATCH --job-name=test
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=16
#SBATCH
--mem=32G
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1
python train.py
