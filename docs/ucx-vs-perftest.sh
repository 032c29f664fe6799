#!/usr/bin/env bash
# Best of 3 interleaved runs: verbena fabric-bench vs ucx_perftest, same transport,
# size and window (docs/PERFORMANCE.md). Needs a `--features ucx` release build
# and ucx-utils. TRANSPORTS="shm tcp" by default.
V=${VERBENA:-target/release/verbena}
pt() { local tls=$1; shift; local port=$((20000 + RANDOM % 20000)); (UCX_TLS=$tls timeout 60 ucx_perftest -p $port > /dev/null 2>&1 &); sleep 0.7; UCX_TLS=$tls timeout 60 ucx_perftest 127.0.0.1 -p $port "$@" 2>&1 | awk '/Final/ {print $NF}'; sleep 0.3; }
best() { sort -n | tail -1; }
for t in ${TRANSPORTS:-shm tcp}; do
  tls=$([ $t = shm ] && echo "sm,self" || echo "tcp,self")
  n=$([ $t = shm ] && echo 400000 || echo 3000)
  for w in 1 16; do
    for op in read cas rpc; do
      ours=(); theirs=()
      for i in 1 2 3; do
        ours+=($($V fabric-bench --transport $t --op $op --window $w --seconds 2 2>/dev/null | sed -E 's/.*: ([0-9]+) ops\/s.*/\1/'))
        case $op in
          read) theirs+=($(pt $tls -t ucp_get -s 8 -n $n -O $w));;
          cas)  theirs+=($(pt $tls -t ucp_cswap -n $n -O $w));;
          rpc)  if [ $w = 1 ]; then theirs+=($(pt $tls -t ucp_am_lat -s 8 -n $((n/4)))); else theirs+=($(pt $tls -t ucp_am_bw -s 8 -n $n)); fi;;
        esac
      done
      o=$(printf "%s\n" "${ours[@]}" | best); p=$(printf "%s\n" "${theirs[@]}" | best)
      echo "$t window=$w $op verbena=$o perftest=$p ratio=$(python3 -c "print(round($o/$p,3) if $p else 'n/a')") all_ours=${ours[*]} all_perftest=${theirs[*]}"
    done
  done
done
uptime
