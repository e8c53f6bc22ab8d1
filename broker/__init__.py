"""The broker. Importing the package first lets ``protocol.native`` load the compiled build
of the request path's modules (some are here and in ``storage``), when a current one exists."""

import protocol as _protocol  # noqa: F401  (installs protocol.native's finder first)
