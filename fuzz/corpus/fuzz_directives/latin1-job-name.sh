#!/bin/sh
# A whole-node training job: the #SBATCH lines are read by `hachi submit` as sbatch would.
#SBATCH --job-name=tráin
#SBATCH --partition=gpu8
#SBATCH --gres=gpu:8
#SBATCH --time=10:00
#SBATCH --output=train-%j.out
echo "job $HACHI_JOB_ID ($HACHI_JOB_NAME) on $HACHI_NODENAME: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
echo "torchrun would see MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK"
sleep "${1:-6}"
