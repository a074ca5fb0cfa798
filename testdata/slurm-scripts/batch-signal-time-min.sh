#!/bin/bash
# Modelled on the #SBATCH lines of dstdev/base-cluster-docs
# docs/jobs/examples/variable-time-jobs/cori-haswell/variable-time-jobs.sh
#SBATCH -J vtj
#SBATCH -q regular
#SBATCH -C haswell
#SBATCH -N 2
#SBATCH --time=48:00:00
#SBATCH --error=vtj-%j.err
#SBATCH --output=vtj-%j.out
#SBATCH --mail-user=someone@example.org
#
#SBATCH --comment=96:00:00  #desired timelimit
#SBATCH --signal=B:USR1@60
#SBATCH --requeue
#SBATCH --open-mode=append

trap 'echo checkpoint' USR1
./a.out &
wait
