# Benchmarks: minikafka and Apache Kafka side by side (bench/cli.py). ARGS="--quick" etc.
.PHONY: bench
bench:
	./tools/fetch-kafka-jars
	.venv/bin/python -m bench $(ARGS)
