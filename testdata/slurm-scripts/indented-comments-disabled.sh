#!/usr/bin/env bash
# Modelled on the #SBATCH lines of simonalford42/abstraction run.sh: comment lines that
# start with a space between the directives, and directives disabled as "#xSBATCH".


 # job name
#SBATCH -J sv
 # output file (%j expands to jobID)
#SBATCH -o out/bw10_%A.out
 # total nodes
#SBATCH -N 1
 # total cores
#SBATCH -n 1
#SBATCH --cpus-per-task=8
 # total limit (hh:mm:ss)
#SBATCH -t 72:00:00
#SBATCH --mem=65G
#xSBATCH --mem=20G
#SBATCH --gres=gpu:1
#SBATCH --partition=gpu
#xSBATCH --partition=other
python -u main.py "$@"
