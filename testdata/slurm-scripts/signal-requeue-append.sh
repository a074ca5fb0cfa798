#!/bin/bash
# Modelled on the #SBATCH lines of gigantocypris/CT_NVAE experimental/signal_interrupt.sh
# (a NERSC Perlmutter job: -C gpu given twice, a license with -L)

#SBATCH -A m0000_g
#SBATCH --time=10:00:00
#SBATCH -C gpu
#SBATCH -N 1
#SBATCH -J sig_interrupt      # job name
#SBATCH -C gpu
#SBATCH -q preempt
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH -o %j.out
#SBATCH -e %j.err
#SBATCH --signal=USR1@60
#SBATCH --requeue
#SBATCH --open-mode=append

echo "start $(date)"
srun python checkpointing.py
