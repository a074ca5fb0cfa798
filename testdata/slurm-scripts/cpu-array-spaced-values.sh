#!/bin/bash
# Modelled on the #SBATCH lines of zanderharteveld/tbpipeline .../step01/submit.sh:
# a CPU-only array, values after a space, a bare memory number (MB).
#SBATCH --nodes 1
#SBATCH --partition=serial
#SBATCH --ntasks-per-node 1
#SBATCH --cpus-per-task 1
#SBATCH --mem 4096
#SBATCH --time 10:00:00
#SBATCH --array=1-200
#SBATCH --output=/scratch/someone/logs/_output.%A..%a.out
#SBATCH --error=/scratch/someone/logs/_output.%A..%a.err

bash step01/exec.sh "${SLURM_ARRAY_TASK_ID}"
