#!/bin/bash
# Modelled on the #SBATCH lines of AbtinDjavadifar/ComputeCanada cedar_gpu_node_job.sh
#SBATCH --nodes=1
#SBATCH --gres=gpu:4
#SBATCH --ntasks-per-node=24
#SBATCH --exclusive
#SBATCH --mem=125G
#SBATCH --time=3:00
nvidia-smi
