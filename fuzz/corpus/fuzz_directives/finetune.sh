#!/bin/sh
# A 2-GPU fine-tuning job in the shared partition.
#SBATCH --job-name=finetune
#SBATCH --partition=gpu-shared
#SBATCH --gpus=2
#SBATCH --time=5:00
#SBATCH --output=finetune-%j.out
echo "job $HACHI_JOB_ID ($HACHI_JOB_NAME) on $HACHI_NODENAME: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
sleep "${1:-4}"
