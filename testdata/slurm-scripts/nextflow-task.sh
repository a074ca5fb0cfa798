#!/bin/bash
# The shape Nextflow's Slurm executor writes for a task's .command.run (nextflow-io/nextflow
# modules/nextflow/src/main/groovy/nextflow/executor/SlurmExecutor.groovy, getDirectives):
# options and values separated by a space, --no-requeue, a batch-only signal, memory in M.
#SBATCH -J nf-ALIGN_(sample1)
#SBATCH -o /data/work/3f/a9c2e1/.command.log
#SBATCH --no-requeue
#SBATCH --signal B:USR2@30
#SBATCH -c 4
#SBATCH -t 02:00:00
#SBATCH --mem 8192M
#SBATCH -p batch
NXF_CHDIR=/data/work/3f/a9c2e1
bash .command.sh
