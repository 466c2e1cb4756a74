#!/usr/bin/env bash
# status.sh JOBID - the status command of the cluster-generic profile.
#
# Prints exactly one line: running, success or failed (what
# snakemake-executor-plugin-cluster-generic expects), from the files submit.sh writes.
# On a batch system, ask it instead, e.g. PBS: `qstat -fx JOBID` (job_state, Exit_status);
# LSF: `bjobs -noheader -o stat JOBID` (PEND/RUN -> running, DONE -> success, EXIT -> failed).
set -uo pipefail
state=${CLUSTER_GENERIC_STATE:-.snakemake/cluster-generic}
d=$state/$1

exit_status() { [ "$(cat "$d/exitcode")" = 0 ] && echo success || echo failed; }

if [ -f "$d/exitcode" ]; then exit_status; exit 0; fi
if [ ! -d "$d" ]; then echo failed; exit 0; fi     # unknown job id
if [ ! -s "$d/pid" ]; then echo running; exit 0; fi # submitted, not yet started
if kill -0 "$(cat "$d/pid")" 2>/dev/null; then echo running; exit 0; fi
# The process is gone: it may have written its exit code just now; otherwise it was
# killed (cancel.sh, OOM killer, reboot) and the job failed.
if [ -f "$d/exitcode" ]; then exit_status; else echo failed; fi
