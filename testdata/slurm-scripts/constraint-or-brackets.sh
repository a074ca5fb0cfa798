#!/bin/bash
# Modelled on the #SBATCH lines of a public evaluation script (found by content): a
# constraint "[a|b|c]", --get-user-env, a time in hours past a day, append and requeue.
#SBATCH --job-name=eval
#SBATCH --output=watch_folder/%x_%j.log
#SBATCH -N 1                            # Total number of nodes requested
#SBATCH --get-user-env                  # retrieve the users login environment
#SBATCH --mem=32G                       # server memory requested (per node)
#SBATCH -t 960:00:00                    # Time limit (hh:mm:ss)
#SBATCH --partition=gpu                 # Request partition
#SBATCH --constraint="[a100|h200|h100]"
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --gres=gpu:1                    # Type/number of GPUs needed
#SBATCH --open-mode=append              # Do not overwrite logs
#SBATCH --requeue                       # Requeue upon preemption

python -u main.py
