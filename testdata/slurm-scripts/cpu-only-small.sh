#!/bin/bash
# Modelled on the #SBATCH lines of wzbillings/mlm-cluster-test job.sh: a CPU-only job.
#SBATCH --partition=batch
#SBATCH --job-name=test
#SBATCH --ntasks=1
#SBATCH --time=4:00:00
#SBATCH --mem=10G
#SBATCH --cpus-per-task=4

Rscript fit.R
