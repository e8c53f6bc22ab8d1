"""Local development clusters: real ZooKeeper servers (and later brokers) as child processes.

Used by the tests, the benchmarks and ``minikafka cluster``. Nothing here is imported by the
broker: it sits beside the command line, above ``broker``/``controller`` in the layers.
"""
