#! /bin/bash
# Modelled on the #SBATCH lines of 777pomingzi/URS test.sh (note the space after "#!")
#SBATCH -p rtx2080
#SBATCH -N 1
#SBATCH --gres=gpu:2

python -m torch.distributed.run --nproc_per_node=2 main.py
