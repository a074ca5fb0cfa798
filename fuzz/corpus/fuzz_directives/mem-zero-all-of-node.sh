#!/bin/sh
#SBATCH --gres=gpu:H100:1 --mem=0
#SBATCH --mem=0T
srun true
