"""Metrics with Kafka's names for Prometheus, the request log, and health/readiness.

Off by default; ``metrics.prometheus.listener=HOST:PORT`` turns on the HTTP endpoint
(``endpoint``: ``/metrics``, ``/health``, ``/ready``). Modules:

- ``requests``: per request type (RequestMetrics): requests per version, errors per code,
  the stage times as histograms; the ``kafka.request.logger`` DEBUG log (with sizes);
- ``stages``: where a request's local time ends (handlers parking in a purgatory);
- ``topics``: bytes and messages in/out per topic (BrokerTopicMetrics);
- ``network``: connections per listener; ``collectors``: every gauge, read at scrape time
  (replica manager, logs, purgatories, controller, groups, consumer lag, log cleaner);
- ``loop_idle``: NetworkProcessorAvgIdlePercent / RequestHandlerAvgIdlePercent of the loop;
- ``histogram``, ``response_errors``: plain bucket counts and error counting for the hot
  path; ``service``: what the server builds; ``endpoint``: the HTTP server and broker state.

Names. Each metric is named the way the Prometheus JMX exporter's example Kafka
configuration derives names from Kafka's MBeans (prometheus/jmx_exporter,
``examples/kafka-2_0_0.yml``, the same rules as ``examples/kafka-kraft-3_0_0.yml``; read at
commit 4b843c6), with ``lowercaseOutputName: true``, so dashboards built on that exporter
find the same series. The rules followed:

- "Generic per-second counters": ``kafka.<d><type=T, name=NPerSec, k=v...><>Count`` ->
  ``kafka_<d>_<t>_<n>_total`` with the MBean's keys as labels: BytesInPerSec ->
  ``kafka_server_brokertopicmetrics_bytesin_total{topic}`` (and without ``topic``: all
  topics), RequestsPerSec -> ``kafka_network_requestmetrics_requests_total{request,
  version}``, ErrorsPerSec -> ``..._errors_total{request,error}``, IsrShrinksPerSec ->
  ``kafka_server_replicamanager_isrshrinks_total``;
- "Generic gauges for MeanRate Percent": ``kafka.<d><type=T, name=NPercent><>Value`` (or
  ``MeanRate``) -> ``kafka_<d>_<t>_<n>_percent``:
  ``kafka_network_socketserver_networkprocessoravgidle_percent``,
  ``kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent``;
- "Generic gauges": ``kafka.<d><type=T, name=N, k=v...><>Value`` -> ``kafka_<d>_<t>_<n>``:
  ``kafka_server_replicamanager_underreplicatedpartitions``,
  ``kafka_controller_kafkacontroller_activecontrollercount``,
  ``kafka_log_log_size{topic,partition}``,
  ``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation}``,
  ``kafka_network_requestchannel_requestqueuesize``, ``kafka_cluster_partition_*``;
- the special case ``kafka.coordinator.(\\w+)<type=T, name=N><>Value`` ->
  ``kafka_coordinator_<g>_<t>_<n>``: ``kafka_coordinator_group_groupmetadatamanager_numgroups``;
- histograms (``...TimeMs``, ``LogFlushRateAndTimeMs``): the exporter's
  "Emulate Prometheus 'Summary'" rules give ``kafka_<d>_<t>_<n>_count`` plus quantile
  gauges ``kafka_<d>_<t>_<n>{quantile="0.99"}``. Here they are real Prometheus histograms
  of the same base name: ``_count`` matches the exporter's series exactly; ``_sum`` is
  added; quantiles come from ``histogram_quantile(0.99, rate(<name>_bucket[5m]))`` instead
  of the quantile gauges (the one change a Kafka dashboard needs). Values in ms, as
  Kafka's names say;
- Kafka-client-style metrics without ``name=`` (``kafka.server<type=socket-server-metrics,
  listener=L, networkProcessor=P><>connection-count``) follow the KRaft config's
  ``kafka.server<type=(.+)><>([a-z-]+)`` / ``...-total`` rules, with the extra MBean keys
  as labels as in the quota rules: ``kafka_server_socket_server_metrics_connection_count
  {listener,networkProcessor}``, ``..._connection_creation_total``,
  ``..._connection_close_total``.

Left out on purpose: Kafka's ``RequestBytes`` histogram (request sizes are in the request
log): a fourth bucket lookup per request was the largest single cost on the request path
after the stage times (valgrind: ~2,700 instructions of ~347,000 per P5 request).

Not Kafka MBeans: ``kafka_consumergroup_lag{consumergroup,topic,partition}`` (the name
kafka_exporter uses), and ``prometheus_client``'s ``process_*`` and ``python_*``.
"""
