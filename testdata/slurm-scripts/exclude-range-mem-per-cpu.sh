#!/bin/bash
# Modelled on the #SBATCH lines of v-i-s-h/diffusion-models DDPM/slurm_submit.sh
#SBATCH --time=3:00:00
#SBATCH --mem-per-cpu=6G
#SBATCH --gres=gpu:1
#SBATCH --exclude=dgx[1-7]
#SBATCH --output=logs/job-%A.out
#SBATCH --error=logs/job-%A.err

python train.py
