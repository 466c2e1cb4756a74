#!/usr/bin/env bash
# submit.sh JOBSCRIPT - the submit command of the cluster-generic profile.
#
# snakemake-executor-plugin-cluster-generic calls it once per job (or group job) with
# the path of a job script that Snakemake wrote, and reads the job id from the first
# line of stdout (so nothing else may go to stdout). This example "cluster" is the
# local machine: each job runs as its own background process in its own session
# (setsid), detached from Snakemake, and its state goes to files that status.sh and
# cancel.sh read:
#
#   $STATE/<jobid>/pid        PID of the job's process (written by the job itself)
#   $STATE/<jobid>/exitcode   exit status of the job script, written when it ends
#   $STATE/<jobid>/job.log    stdout + stderr of the job
#   $STATE/jobs.tsv           one line per submission: jobid, pid, name, type, threads, mem_mb, runtime
#
# STATE is .snakemake/cluster-generic under the working directory (override with
# CLUSTER_GENERIC_STATE). On a real batch system, replace the block marked SUBMIT
# with the scheduler's command and print its job id, e.g.
#   PBS/Torque: qsub -N "smk-$name" -l "nodes=1:ppn=$threads,mem=${mem_mb}mb,walltime=$walltime" -o "$jobdir/job.log" -j oe "$jobscript"
#   LSF:        bsub -J "smk-$name" -n "$threads" -R "rusage[mem=$mem_mb]" -W "$runtime" -o "$jobdir/job.log" < "$jobscript" | sed 's/Job <\([0-9]*\)>.*/\1/'
# and make status.sh / cancel.sh ask qstat / bjobs and qdel / bkill instead.
set -euo pipefail

jobscript=$1
state=${CLUSTER_GENERIC_STATE:-.snakemake/cluster-generic}
mkdir -p "$state"

# Job properties: Snakemake writes them as JSON on the "# properties = {...}" line.
# Parsed as JSON with Python (Snakemake's interpreter is on PATH): a grep would also
# match keys of the same name elsewhere in it, e.g. the config's `runtime: auto`.
props=$(sed -n 's/^# properties = //p' "$jobscript")
read -r type name threads mem_mb runtime < <(printf '%s' "$props" | python3 -c '
import json, sys
p = json.load(sys.stdin)
res = p.get("resources") or {}  # from default-/set-resources; runtime in minutes
name = p.get("groupid") if p.get("type") == "group" else p.get("rule")
print(p.get("type") or "single", name or "job", p.get("threads") or 1,
      int(res.get("mem_mb") or 1000), int(res.get("runtime") or 60))
')
walltime=$(printf '%02d:%02d:00' $((runtime / 60)) $((runtime % 60)))
: "$walltime"                                               # (used by the PBS example above)

jobdir=$(mktemp -d "$state/job.XXXXXXXX")
jobid=${jobdir##*/}
# Keep a copy: Snakemake removes its temporary job scripts when it exits, while a
# submitted job may still be waiting or running.
cp "$jobscript" "$jobdir/jobscript.sh"

# --- SUBMIT: start the job as a separate background process in its own session ----
setsid bash -c '
  echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
  bash "$1/jobscript.sh" > "$1/job.log" 2>&1
  echo $? > "$1/exitcode.tmp" && mv "$1/exitcode.tmp" "$1/exitcode"
' job "$jobdir" < /dev/null > /dev/null 2>&1 &
# Wait (at most 10 s) for the job to record its PID, so that the log below is complete.
for _ in $(seq 1 100); do [ -s "$jobdir/pid" ] && break; sleep 0.1; done
pid=$(cat "$jobdir/pid" 2>/dev/null || echo '?')
# -----------------------------------------------------------------------------------

printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$jobid" "$pid" "$name" "$type" "$threads" "$mem_mb" "$runtime" >> "$state/jobs.tsv"
echo "$jobid"
