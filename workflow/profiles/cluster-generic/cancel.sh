#!/usr/bin/env bash
# cancel.sh JOBID... - the cancel command of the cluster-generic profile.
#
# Snakemake calls it with the ids of all running jobs when it is interrupted (Ctrl-C).
# Each job runs in its own session (setsid in submit.sh), so the whole process group
# (the job script, the Snakemake inside it, the rule's script) is stopped at once.
# On a batch system: `qdel "$@"` (PBS) or `bkill "$@"` (LSF).
set -uo pipefail
state=${CLUSTER_GENERIC_STATE:-.snakemake/cluster-generic}
for jobid in "$@"; do
  d=$state/$jobid
  pid=$(cat "$d/pid" 2>/dev/null) || continue
  [ -f "$d/exitcode" ] && continue          # already finished
  kill -TERM -- "-$pid" 2>/dev/null || true # the job's process group (= its session)
  echo cancelled > "$d/cancelled"
done
exit 0
