#!/bin/bash
# Modelled on the #SBATCH lines of jamesafranke/ViT_clouds scripts/jim_bash.bash
#SBATCH --time=00:30:00
#SBATCH --job-name=vit
#SBATCH --output=%x_%A.out
#SBATCH --error=%x_%A.err
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4

torchrun --standalone --nproc_per_node=4 train.py
