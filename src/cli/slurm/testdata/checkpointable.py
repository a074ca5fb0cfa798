#!/usr/bin/env python3
"""What submitit's runner does with a Checkpointable job, with its calls as they are.

submitit (facebookincubator/submitit, core/job_environment.py) cannot be installed here
(it is not packaged by Debian), so this is its signal handling and requeue, step for
step: the task registers the scheduler's signal (USR2, submitit's default) to checkpoint
and requeue, and SIGTERM and SIGCONT to be bypassed, since Slurm sends those to every
task once the job is requeued or preempted; on USR2, rank 0 saves its state, runs
`scontrol requeue $SLURM_JOB_ID` and exits; a rank other than 0 does nothing. The next
run reads the checkpoint back and goes on where it stopped.

Usage: checkpointable.py STATE_DIR RUNS — done once it has been requeued RUNS times.
"""
import os
import signal
import subprocess
import sys
import time

state_dir, runs = sys.argv[1], int(sys.argv[2])
checkpoint = os.path.join(state_dir, "checkpoint")
job = os.environ["SLURM_JOB_ID"]
rank = int(os.environ.get("SLURM_PROCID", "0"))
restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
progress = 0


def say(line):
    # One write per line: srun relays two tasks' output as it comes, and print() writes
    # the line and its newline apart.
    os.write(1, (line + "\n").encode())


if os.path.exists(checkpoint):
    with open(checkpoint) as f:
        progress = int(f.read())


def checkpoint_and_try_requeue(signum, frame):
    say(f"rank {rank}: caught {signal.Signals(signum).name} at {progress}")
    if rank != 0:
        return  # submitit: "do not sys.exit, because it might kill the master task"
    with open(checkpoint + ".tmp", "w") as f:
        f.write(str(progress))
    os.replace(checkpoint + ".tmp", checkpoint)
    say(f"rank 0: requeueing job {job}")
    subprocess.run(["scontrol", "requeue", job], check=True)
    sys.exit(255)


def bypass(signum, frame):
    say(f"rank {rank}: bypassing {signal.Signals(signum).name}")


signal.signal(signal.SIGUSR2, checkpoint_and_try_requeue)
signal.signal(signal.SIGTERM, bypass)
signal.signal(signal.SIGCONT, bypass)
say(f"rank {rank}: run {restarts} from {progress}")
with open(os.path.join(state_dir, f"ready-{restarts}-{rank}"), "w"):
    pass
if restarts >= runs:
    say(f"rank {rank}: done after {restarts} requeues")
    sys.exit(0)
for _ in range(6000):  # at most 10 minutes
    progress += 1
    time.sleep(0.1)
sys.exit(3)  # never signalled
