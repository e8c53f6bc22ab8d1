"""Fault injection with a no-loss checker (Jepsen-style), for minikafka and Apache Kafka.

``python -m tests.chaos --faults N --seed S`` (``__main__``) starts a cluster of real broker
processes and a real ZooKeeper, runs stock clients against it, injects the faults the seed
schedules, heals, reads every replica back and checks the history. Modules, in the order a
run uses them:

- ``netns``: a network namespace per broker and ZooKeeper node on a bridge; cuts and heals;
- ``nodes``, ``cluster``: the processes (minikafka or Apache Kafka 3.9.1 brokers, tmpfs log
  dirs) and the harness's view of them through ZooKeeper;
- ``workloads``: idempotent acks=all writers (kafka-python, confluent-kafka), an acks=1
  writer, consumers committing in a group, an observer of the committed offsets;
- ``history``: every send with its outcome, every fault, every commit;
- ``faults``: the kinds of fault and the seeded schedule;
- ``campaign``: one run, start to check; ``modes``: the CI and long configurations;
- ``replicas``: each replica read from its log dir; ``checker``: the anomalies and figures;
- ``report``: Markdown and JSON, broker log excerpts around each loss.

``test_*.py`` here are the harness's own tests (the checker on made-up histories, and the
harness catching a broker that loses acknowledged data) and CI's short run.
"""
