#!/bin/bash
# Modelled on the #SBATCH lines of JH-LEE-KR/NodesTest template.sh: a whole 8-GPU node
# pinned with -w, a day written "1-0", and a misspelt "#SBTACH" (a comment to Slurm).

#SBATCH --job-name=node_test
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH -p admin
#SBATCH -w agi1
#SBATCH --cpus-per-gpu=4
#SBATCH --mem-per-gpu=20G
#SBATCH --time=1-0
#SBATCH -o %N_%x_%j.out
#SBTACH -e %N_%x_%j.err

torchrun --nproc_per_node=8 main.py
