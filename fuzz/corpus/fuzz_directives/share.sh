#!/bin/sh
#SBATCH --gres=gpu:H100:1
#HACHI --gpu-share .5 --gpu-mem 10240M --time=UNLIMITED --chdir=/tmp --comment="a b"
#SBATCH --wrap="echo hi" --parsable --no-requeue --mem=1T
