#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (issue #18): installs Debian's slurm-wlm and
# munge when missing, starts munged + slurmctld + slurmd with a minimal private configuration
# (one node = this host, 2 CPUs, proctrack/linuxproc, task/none, no cgroups; state, spool, logs and
# the munge socket under a temporary folder), then
#   1. runs a small stories260K influence sweep as a 4-task array + dependent merge through
#      `kvcompact slurm influence ... --array 4` (sbatch) and checks the merged influence.{json,csv}
#      equal a one-process run byte for byte; then a 6-document compact-eval as a 3-task array +
#      merge (`kvcompact slurm compact-eval ... --array 3`), its table against a one-process run;
#      and a 4-article qa-eval as a 2-task array + merge against its one-process table;
#   2. fault test: SIGKILLs one running array task mid-run (scancel --signal=KILL), requeues it
#      (scontrol requeue) and checks that no finished unit was lost or rewritten, that the requeued
#      task skipped them, and that the final merge again equals the one-process run.
# The cluster is stopped at the end whatever happens (trap). Usage: run_slurm_test.sh [KVCOMPACT]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
KVC=$(readlink -f "${1:-build/kvcompact}")
SHARED=${KVC_SHARED_DIR:-$(readlink -f ../shared)}
[ -d "$SHARED/models/stories260K" ] || SHARED=/work/shared
MODEL=$SHARED/models/stories260K/stories260K.bin
DATA=$SHARED/data/tinystories/tinystories_val_head.txt
say() { echo "[slurm-test $(date +%H:%M:%S)] $*"; }
fail() { say "FAIL: $*"; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null ||
    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null; }
fi

T=$(mktemp -d /tmp/kvc-slurm.XXXXXX)
chmod 700 "$T"
PIDS=()
cleanup() {
  local rc=$?
  say "stopping the cluster"
  if [ -n "${SLURM_CONF:-}" ]; then scancel --full -u "$(id -un)" >/dev/null 2>&1 || true; fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[$i]}" 2>/dev/null || true; done
  sleep 1
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -9 "${PIDS[$i]}" 2>/dev/null || true; done
  if [ $rc -ne 0 ]; then
    for f in "$T"/slurmctld.log "$T"/slurmd.log "$T"/munged.log; do
      [ -f "$f" ] && { echo "--- tail of $f"; tail -n 15 "$f"; }
    done
    for f in "$T"/out*/slurm/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  fi
  rm -rf "$T"
  exit $rc
}
trap cleanup EXIT INT TERM

# --- munge: a private key and socket
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge.key"
mkdir -p "$T/munge"
chmod 700 "$T/munge"
munged --foreground --force --key-file="$T/munge.key" --socket="$T/munge/munge.sock" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" >>"$T/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.sock" ] || fail "munged did not start"

# --- slurm.conf
HOST=$(hostname -s)
PORT=$((17000 + RANDOM % 2000))
mkdir -p "$T/state" "$T/spool"
export SLURM_CONF=$T/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=kvctest
SlurmctldHost=$HOST
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
SchedulerParameters=defer_batch=0
SlurmctldTimeout=30
SlurmdTimeout=60
MinJobAge=600
NodeName=$HOST CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -c -f "$SLURM_CONF" >>"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
sleep 1
slurmd -D -f "$SLURM_CONF" -N "$HOST" >>"$T/slurmd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
  sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break
  sleep 1
done
sinfo -h -o '%t' | grep -qE '^(idle|mix|alloc)' || fail "the node did not come up: $(sinfo 2>&1)"
say "cluster up: $(sinfo -h -o 'node %N, %c CPUs, state %t') ($(sbatch --version))"

wait_jobs() {  # wait until no job of ours is pending or running (timeout $1 s)
  local deadline=$((SECONDS + $1))
  while [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
    [ $SECONDS -lt $deadline ] || fail "jobs still queued after $1 s: $(squeue 2>&1)"
    sleep 1
  done
}

# The one-process references run with --threads 1, as the array tasks (--cpus 1): OpenBLAS's sgemm
# splits a product differently with 2 threads on some CPUs (AVX-512 EPYC here), which changes the
# last bits; equality holds at equal thread counts.
# --- the study: 2 documents x 6 heads x 3 ratios (12 units)
ARGS=(--model "$MODEL" --data "$DATA" --docs 2 --ratios 0.05,0.25,0.5 --baseline 0.05
      --heads L0H0,L1H1,L2H2,L3H3,L4H0,L4H1)
say "one-process run"
t0=$(date +%s.%N)
"$KVC" influence "${ARGS[@]}" --out "$T/one" --threads 1 >/dev/null 2>"$T/one.err" || { cat "$T/one.err"; fail "one-process run"; }
t1=$(date +%s.%N)
ONE_S=$(echo "$t1 - $t0" | bc)
say "one-process run: $ONE_S s"

say "4-task array + merge through sbatch"
t0=$(date +%s.%N)
"$KVC" slurm influence "${ARGS[@]}" --out "$T/out" --array 4 --cpus 1 --time 10:00 | sed 's/^/  /'
wait_jobs 300
t1=$(date +%s.%N)
ARRAY_S=$(echo "$t1 - $t0" | bc)
say "array + merge: $ARRAY_S s (submission to the merge job's end)"
cat "$T"/out/slurm/logs/merge_*.log | sed 's/^/  merge log: /'
for f in influence.json influence.csv; do
  cmp "$T/one/$f" "$T/out/$f" || fail "$f of the array differs from the one-process run"
done
say "merged influence.json and influence.csv equal the one-process run byte for byte"
"$KVC" slurm --status "$T/out" | sed 's/^/  /'

# --- compact-eval over 6 documents as a 3-task array + merge: the merged table equals a
# one-process run (all but the timing columns, byte for byte)
CE=(--model "$MODEL" --data "$DATA" --docs 6 --ratios 0.1,0.5 --methods am,snapkv,random)
"$KVC" compact-eval "${CE[@]}" --threads 1 --csv "$T/ce_one.csv" >/dev/null 2>"$T/ce_one.err" ||
  { cat "$T/ce_one.err"; fail "compact-eval one-process run"; }
"$KVC" slurm compact-eval "${CE[@]}" --out "$T/ceout" --array 3 --cpus 1 --time 10:00 | sed 's/^/  /'
wait_jobs 300
cat "$T"/ceout/slurm/logs/merge_*.log | sed 's/^/  merge log: /'
cmp <(cut -d, -f1-8 "$T/ce_one.csv") <(cut -d, -f1-8 "$T/ceout/compact_eval.csv") ||
  fail "the merged compact-eval table differs from the one-process run"
say "compact-eval, 3-task array + merge: the merged table equals the one-process run (columns 1-8 byte for byte)"
"$KVC" slurm --status "$T/ceout" | sed 's/^/  /'

# --- qa-eval over 4 cloze articles as a 2-task array + merge: the merged table equals a
# one-process run byte for byte (qa-eval's table has no timing columns)
"$KVC" make-cloze --data "$DATA" --articles 4 --questions 2 --seed 5 -o "$T/cloze.jsonl" >/dev/null ||
  fail "make-cloze"
QA=(--model "$MODEL" --data "$T/cloze.jsonl" --ratios 0.2,0.5 --methods am,random)
"$KVC" qa-eval "${QA[@]}" --threads 1 --csv "$T/qa_one.csv" >/dev/null 2>"$T/qa_one.err" ||
  { cat "$T/qa_one.err"; fail "qa-eval one-process run"; }
"$KVC" slurm qa-eval "${QA[@]}" --out "$T/qaout" --array 2 --cpus 1 --time 10:00 | sed 's/^/  /'
wait_jobs 300
cat "$T"/qaout/slurm/logs/merge_*.log | sed 's/^/  merge log: /'
cmp "$T/qa_one.csv" "$T/qaout/qa_eval.csv" || fail "the merged qa-eval table differs from the one-process run"
say "qa-eval, 2-task array + merge: the merged table equals the one-process run byte for byte"
"$KVC" slurm --status "$T/qaout" | sed 's/^/  /'

# --- fault test: more units per task, so that a task can be killed mid-run
# 4 documents x 20 heads = 80 units, 20 per task (task 1: document 2); 51 ratios and --plain make
# a task run long enough (seconds) to be killed mid-run.
FARGS=(--model "$MODEL" --data "$DATA" --docs 4 --ratios 0:0.5:51 --baseline 0.05 --heads all --plain)
say "fault test: one-process reference"
t0=$(date +%s.%N)
"$KVC" influence "${FARGS[@]}" --out "$T/fone" --threads 1 >/dev/null 2>"$T/fone.err" || { cat "$T/fone.err"; fail "reference run"; }
FONE_S=$(echo "$(date +%s.%N) - $t0" | bc)
say "fault study, one process: $FONE_S s"
"$KVC" slurm influence "${FARGS[@]}" --out "$T/fout" --array 4 --cpus 1 | sed 's/^/  /'
JOB=$(squeue -h -o '%F' | sort -n | head -n1)
# Wait until task 1 is running and has written some, not all, of its units.
victim=1
shard_done() { ls "$T"/fout/units/doc_00001_*.json 2>/dev/null | wc -l || true; }  # task 1's units on disk
deadline=$((SECONDS + 240))
while :; do
  state=$(squeue -h -j "${JOB}_${victim}" -o %T 2>/dev/null || true)
  n=0
  [ "$state" = RUNNING ] && n=$(shard_done)
  [ "$state" = RUNNING ] && [ "$n" -ge 1 ] && [ "$n" -lt 20 ] && break
  [ $SECONDS -lt $deadline ] || fail "task $victim never ran with units done (state '$state', $n units)"
  sleep 0.1
done
say "killing task ${JOB}_${victim} (SIGKILL) with $n of its 20 units on disk"
scancel --signal=KILL "${JOB}_${victim}"
for _ in $(seq 60); do
  st=$(scontrol show job "${JOB}_${victim}" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n1)
  case "$st" in *RUNNING* | *COMPLETING* | "") sleep 0.5 ;; *) break ;; esac
done
killed_n=$(shard_done)
stat -c '%n %i %.9Y' "$T"/fout/units/*.json | sort >"$T/stat_before"
say "task ${JOB}_${victim} after the kill: $st; $killed_n of its units on disk, $(wc -l <"$T/stat_before") units in all"
scontrol requeue "${JOB}_${victim}"
# A requeued job waits for a begin time a while ahead; start it now.
scontrol update JobId="${JOB}_${victim}" StartTime=now >/dev/null 2>&1 || true
say "requeued ${JOB}_${victim}: $(squeue -h -j "${JOB}_${victim}" -o '%T (%r)' 2>/dev/null || true)"
wait_jobs 400
cat "$T"/fout/slurm/logs/shard_${victim}.log | grep -E 'kvcompact: job|already done|units .*swept|error' | sed 's/^/  task log: /'
# Every unit finished before the kill is still there and was not rewritten (same inode, mtime).
while read -r name ino mt; do
  grep -q "^$name $ino $mt\$" <(stat -c '%n %i %.9Y' "$T"/fout/units/*.json) || fail "$name was lost or redone"
done <"$T/stat_before"
say "$(wc -l <"$T/stat_before") units finished before the kill: all kept, none rewritten"
skipped=$(grep -cE 'unit [0-9]+ \(doc_[0-9]+_L[0-9]+H[0-9]+\) already done' "$T/fout/slurm/logs/shard_${victim}.log" || true)
say "the requeued task skipped $skipped finished units"
[ "$skipped" -eq "$killed_n" ] || fail "the requeued task skipped $skipped units, $killed_n were done"
[ "$(shard_done)" -eq 20 ] || fail "task $victim has $(shard_done) of 20 units"
cat "$T"/fout/slurm/logs/merge_*.log | sed 's/^/  merge log: /'
grep -q '80/80 units' "$T"/fout/slurm/logs/merge_*.log || fail "the merge job (afterany) did not see all 80 units"
for f in influence.json influence.csv; do
  cmp "$T/fone/$f" "$T/fout/$f" || fail "$f after kill + requeue differs from the one-process run"
done
say "after kill + requeue: influence.json and influence.csv equal the one-process run byte for byte"
say "PASS (one process $ONE_S s, 4-task array + merge $ARRAY_S s; fault study one process $FONE_S s)"
