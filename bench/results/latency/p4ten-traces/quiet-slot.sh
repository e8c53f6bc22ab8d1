#!/bin/bash
# p4ten's quiet slot: P4 at 10,000/s against Kafka, then one trace of each broker.
cd /work/wt/p4ten
Q=/tmp/p4ten/quiet; mkdir -p $Q
stamp() { echo "== $1 $(date -u +%H:%M:%S) $(uptime)" | tee -a $Q/timeline.txt; grep '^cpu' /proc/stat >> $Q/timeline.txt; }
stamp "slot start"
git log --oneline -1 >> $Q/timeline.txt
nice -n 0 .venv/bin/python -m bench --scenarios P4 --p4-rates 10000 --runs 3 --brokers minikafka,kafka --no-java --results-dir $Q/bench > $Q/bench.log 2>&1
echo "bench rc=$?" >> $Q/timeline.txt
stamp "bench done"
nice -n 0 .venv/bin/python -m bench.p4_trace --broker minikafka --rate 10000 --warmup-s 3 --window-s 10 --broker-warm-up-s 30 --sched --capture-only --out-dir $Q/traces > $Q/trace-minikafka.log 2>&1
echo "trace minikafka rc=$?" >> $Q/timeline.txt
stamp "minikafka trace done"
nice -n 0 .venv/bin/python -m bench.p4_trace --broker kafka --rate 10000 --warmup-s 3 --window-s 10 --broker-warm-up-s 90 --sched --capture-only --out-dir $Q/traces > $Q/trace-kafka.log 2>&1
echo "trace kafka rc=$?" >> $Q/timeline.txt
stamp "kafka trace done"
# a second minikafka trace if there is time (ends by 01:56)
if [ $(date -u +%H%M) -le 1754 ]; then
  nice -n 0 .venv/bin/python -m bench.p4_trace --broker minikafka --rate 10000 --warmup-s 3 --window-s 10 --broker-warm-up-s 20 --sched --capture-only --out-dir $Q/traces > $Q/trace-minikafka-2.log 2>&1
  echo "trace minikafka 2 rc=$?" >> $Q/timeline.txt
  stamp "minikafka trace 2 done"
fi
stamp "slot end"
