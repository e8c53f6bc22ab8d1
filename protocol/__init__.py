"""Kafka's wire protocol: framing, primitives, record batches and the generated messages.

Importing the package first lets ``protocol.native`` load the compiled build of the
request path's modules, when a current one exists (see that module).
"""

from protocol import native as _native

_native.install()
