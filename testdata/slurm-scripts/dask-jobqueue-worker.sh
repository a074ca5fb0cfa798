#!/usr/bin/env bash
# The shape dask-jobqueue's SLURMCluster writes (dask/dask-jobqueue dask_jobqueue/slurm.py,
# SLURMJob's header): one task, CPUs per task, memory in K/M/G, a walltime. Values ours.

#SBATCH -J dask-worker
#SBATCH -e /home/alice/dask-logs/dask-worker-%J.err
#SBATCH -o /home/alice/dask-logs/dask-worker-%J.out
#SBATCH -p batch
#SBATCH -A team-a
#SBATCH -n 1
#SBATCH --cpus-per-task=8
#SBATCH --mem=30G
#SBATCH -t 00:30:00

JOB_ID=${SLURM_JOB_ID%;*}

/usr/bin/python3 -m distributed.cli.dask_worker tcp://10.0.0.1:8786 --nthreads 8 --memory-limit 30GiB --name "dummy-name"
