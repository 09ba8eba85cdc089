#!/usr/bin/env bash
# Three "hosts" on one machine: network namespaces strata-mpi-{0,1,2}, each with its own UTS
# namespace (host name strata-mpi-N) and an eth0 veth joined to a bridge in a fourth namespace.
# mpirun (run in host 0) starts one rank per host through a plm_rsh_agent that enters the
# namespace, over TCP on eth0 (--distributed-interface eth0). Checks:
#   1. `strata serve` with --pipeline-parallel-size 3 across the hosts gives the greedy completions
#      of a single process, and prints the world (rank -> host, interface, layers).
#   2. A bad --distributed-interface is a clear error naming the interfaces there are.
#   3. Killing rank 2 while serving: /health turns 503 naming "rank 2 on host strata-mpi-2", a
#      request fails with that message, and the server exits non-zero.
# Needs root (else skipped), iproute2, unshare, curl and OpenMPI. Usage: netns_test.sh STRATA_BIN SOURCE_DIR
set -euo pipefail
bin=$(readlink -f "$1")
src=$(readlink -f "$2")
model=$src/models/strata-tiny
# Skipped (77) where namespaces cannot be made; a missing tool is a failure (install-deps.sh).
[ "$(id -u)" -eq 0 ] || { echo "netns_test: skipped: needs root (ip netns)"; exit 77; }
for t in ip unshare curl mpirun; do
  command -v $t >/dev/null || { echo "netns_test: $t is missing (scripts/install-deps.sh)"; exit 1; }
done
if ! ip netns add strata-mpi-probe 2>/dev/null; then
  echo "netns_test: skipped: this system does not allow network namespaces"; exit 77
fi
ip netns del strata-mpi-probe
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ns=(strata-mpi-0 strata-mpi-1 strata-mpi-2)
hub=strata-mpi-hub
net=10.231.7
work=$(mktemp -d /tmp/strata-netns-XXXXXX)
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for n in "${ns[@]}" $hub; do
    # Anything still running in the namespace goes first.
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$n" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
cleanup_before() {
  for n in "${ns[@]}" $hub; do ip netns del "$n" 2>/dev/null || true; done
}
cleanup_before

ip netns add $hub
ip -n $hub link add br0 type bridge
ip -n $hub link set br0 up
for i in 0 1 2; do
  n=${ns[$i]}
  ip netns add "$n"
  ip link add "smpi$i" type veth peer name eth0 netns "$n"
  ip link set "smpi$i" netns $hub
  ip -n $hub link set "smpi$i" master br0 up
  ip -n "$n" addr add "$net.$((i + 1))/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$n" link set lo up
  # A decoy, as docker0 is on real clusters: the same private address on every host, on an
  # interface that leads nowhere. OpenMPI offered it makes a rank connect to its own copy and
  # wait: the automatic choice (the interface that routes to mpirun) must never pick it.
  ip -n "$n" link add dock0 type veth peer name dock1
  ip -n "$n" addr add 172.17.0.1/16 dev dock0
  ip -n "$n" link set dock0 up
  ip -n "$n" link set dock1 up
done
# (no ping on minimal systems: the first mpirun below is the connectivity check)

# The rsh agent: `agent [ssh options] HOST COMMAND...` runs COMMAND in HOST's namespace, under
# its own host name. Hosts are addresses, mapped back to namespaces.
cat > "$work/agent" <<'EOF'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do shift; done
host=$1
shift
n=$(grep -w "^$host" "$(dirname "$0")/namespaces" | cut -d' ' -f2)
[ -n "$n" ] || { echo "agent: unknown host $host" >&2; exit 1; }
exec ip netns exec "$n" unshare --uts sh -c "hostname $n; $*"
EOF
for i in 0 1 2; do echo "$net.$((i + 1)) ${ns[$i]}"; done > "$work/namespaces"
chmod +x "$work/agent"
printf '%s slots=1\n' $net.1 $net.2 $net.3 > "$work/hosts"

# Runs a command on host 0 (mpirun's host, where rank 0 serves HTTP).
on0() { exec ip netns exec ${ns[0]} unshare --uts sh -c "hostname ${ns[0]}; exec \"\$0\" \"\$@\"" "$@"; }

serve_args=(serve "$model" --load-format dummy --kv-cache-memory 32MiB --max-model-len 512
            --threads 1 --host 0.0.0.0)
mpi_auto=(--hostfile "$work/hosts" -np 3 --mca plm_rsh_agent "$work/agent" --bind-to none
          --mca btl tcp,self)
mpi_args=("${mpi_auto[@]}" --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)

# Starts a server; sets server_pid and port once it listens.
start() {
  local log=$1; shift
  "$@" > "$log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 3000); do
    if port=$(grep -o 'listening on http://[^ ]*:[0-9]*' "$log" | grep -o '[0-9]*$'); then return 0; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then echo "netns_test: server exited:"; cat "$log"; exit 1; fi
    sleep 0.1
  done
  echo "netns_test: the server did not start:"; cat "$log"; exit 1
}

complete() {  # PORT PROMPT -> the completion's JSON
  on0 curl -s "http://$net.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\": \"m\", \"prompt\": \"$2\", \"max_tokens\": 24, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}"
}
texts() {  # PORT -> one line per prompt: the completion text and tokens
  for p in "Once upon a time" "The quick brown fox" "x"; do
    complete "$1" "$p" | python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(repr(c["text"]), c["logprobs"]["tokens"])'
  done
}
fail() { echo "netns_test: FAILED: $*"; exit 1; }

echo "== 1. one process, then 3 ranks on 3 hosts (pipeline parallel 3), the interface chosen"
start "$work/one.log" on0 "$bin" "${serve_args[@]}" --served-model-name m --port 0
expected=$(texts "$port")
kill -TERM "$server_pid"; wait "$server_pid" || fail "the single process did not exit 0"
# No interface named anywhere: the ranks on hosts 1 and 2 choose eth0 (the route to mpirun),
# never the decoy; without that choice this launch hangs on dock0.
start "$work/three.log" on0 mpirun "${mpi_auto[@]}" "$bin" "${serve_args[@]}" \
  --served-model-name m --port 0 --pipeline-parallel-size 3
got=$(texts "$port")
[ "$got" = "$expected" ] || fail "greedy outputs differ:\n$expected\n---\n$got"
for i in 0 1 2; do
  grep -q "rank $i on host ${ns[$i]} (pid [0-9]*), interface " "$work/three.log" ||
    fail "no world table line for rank $i on ${ns[$i]}"; done
grep -q "rank 1 on host ${ns[1]} (pid [0-9]*), interface eth0, layers 1..2 (2)" "$work/three.log" ||
  fail "rank 1's line lacks its interface or layers"
grep -q "rank 2 on host ${ns[2]} (pid [0-9]*), interface eth0" "$work/three.log" ||
  fail "rank 2 did not choose eth0"
kill -TERM "$server_pid"; wait "$server_pid" || true

echo "== 1b. the same with the interface named"
start "$work/named.log" on0 mpirun "${mpi_args[@]}" "$bin" "${serve_args[@]}" \
  --served-model-name m --port 0 --pipeline-parallel-size 3 --distributed-interface eth0
got=$(texts "$port")
[ "$got" = "$expected" ] || fail "greedy outputs differ with the interface named"
kill -TERM "$server_pid"; wait "$server_pid" || true

echo "== 2. a bad interface is a clear error"
set +e
out=$(on0 "$bin" "${serve_args[@]}" --pipeline-parallel-size 3 --distributed-interface nope0 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a bad interface was accepted"
echo "$out" | grep -q "network interface 'nope0' does not exist on this host.*interfaces here: .*eth0 ($net.1)" ||
  fail "unclear bad-interface error: $out"

echo "== 3. rank 2 hangs while serving (SIGSTOP): Strata notices"
hold=$work/hold
start "$work/hang.log" on0 env STRATA_DIST_TIMEOUT=3 STRATA_DEBUG_HOLD_AFTER_FAILURE_FILE="$hold" \
  mpirun "${mpi_args[@]}" -x STRATA_DIST_TIMEOUT "$bin" "${serve_args[@]}" \
  --served-model-name m --port 0 --pipeline-parallel-size 3
complete "$port" "Hello" | grep -q '"finish_reason"' || fail "no completion before the hang"
rank2=$(grep -o "rank 2 on host ${ns[2]} (pid [0-9]*)" "$work/hang.log" | grep -o '[0-9]*)$' | tr -d ')')
[ -n "$rank2" ] || fail "rank 2's pid is not in the world table"
kill -STOP "$rank2"  # pid namespaces are not split: the same pid here
named="rank 2 on host ${ns[2]} did not answer within 3 s"
complete "$port" "Hello" | grep -q "$named" || fail "a request after the hang does not name rank 2"
for _ in $(seq 1 3000); do
  code=$(on0 curl -s -o "$work/health" -w '%{http_code}' "http://$net.1:$port/health")
  [ "$code" != 200 ] && break
  sleep 0.1
done
[ "$code" = 503 ] || fail "/health answered $code"
grep -q "$named" "$work/health" || fail "/health does not name rank 2: $(cat "$work/health")"
touch "$hold"
set +e
wait "$server_pid"
rc=$?
set -e
[ $rc -ne 0 ] || fail "the job exited 0 after losing a rank"
grep -q "$named" "$work/hang.log" || fail "the log does not name rank 2"

echo "== 4. rank 2 is killed while serving: the job ends, naming it"
start "$work/kill.log" on0 mpirun "${mpi_args[@]}" "$bin" "${serve_args[@]}" \
  --served-model-name m --port 0 --pipeline-parallel-size 3
rank2=$(grep -o "rank 2 on host ${ns[2]} (pid [0-9]*)" "$work/kill.log" | grep -o '[0-9]*)$' | tr -d ')')
kill -9 "$rank2"
set +e
wait "$server_pid"
rc=$?
set -e
[ $rc -ne 0 ] || fail "the job exited 0 after losing a rank"
grep -q "process rank 2 .* on node $net.3" "$work/kill.log" || fail "mpirun did not name rank 2: $(tail "$work/kill.log")"
echo "netns_test: all checks passed"
