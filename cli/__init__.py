"""The ``minikafka`` command line: ``minikafka broker | topics | consumer-groups | dump-log |
spark-ingest`` (``cli.main``). The tools speak to brokers through ``client``."""
