#!/bin/bash
#SBATCH -J sweep
#SBATCH -p gpu8 -t 1-02:30:00
#SBATCH --nodes=2 --gpus=16 --cpus-per-gpu=8 --mem-per-gpu=64G
#SBATCH --dependency=afterok:11:12,afterany:13
#SBATCH --array=1-100:3%10
#SBATCH --output="out %x-%j-%a.log" --error='err-%A_%a.log'
#SBATCH --mail-type=END --ntasks=2
#HACHI --gpu-share=0.25 --gpu-mem=20G
#HACHI --container-image=nvcr.io/nvidia/pytorch:24.01 --shm-size=64G
#SBATCH --qos high --account vision --requeue --exclusive --hold
# a comment
srun python train.py
#SBATCH --time=5
