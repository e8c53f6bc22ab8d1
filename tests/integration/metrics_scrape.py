"""Scraping a broker's metrics endpoint in tests, parsed by ``prometheus_client``'s parsers."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.broker_process import BrokerProcess

_URL = re.compile(r"Metrics endpoint at (http://\S+)/metrics")
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def base_url(broker: BrokerProcess) -> str:
    """http://host:port of the broker's metrics endpoint (from its start-up log line)."""
    match = _URL.search(broker.stderr_text())
    assert match is not None, "the broker logged no metrics endpoint"
    return match.group(1)


def get(url: str, *, accept: str | None = None, timeout_s: float = 10.0) -> tuple[int, str]:
    """(status, body) of a GET; HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclass
class Scrape:
    families: dict[str, Metric]
    text: str

    def value(self, name: str, **labels: str) -> float:
        """The sample named ``name`` with exactly these labels (0 when absent: a counter
        that has not moved yet is not exported)."""
        family = self.families.get(_family_name(name, self.families))
        if family is None:
            return 0.0
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
        return 0.0

    def samples(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        family = self.families.get(_family_name(name, self.families))
        if family is None:
            return {}
        return {frozenset(s.labels.items()): float(s.value) for s in family.samples
                if s.name == name}

    def has(self, name: str) -> bool:
        """True when the family of sample ``name`` is exported (maybe without samples yet:
        a label set appears with its first event)."""
        return _family_name(name, self.families) in self.families


def _family_name(sample_name: str, families: dict[str, Metric]) -> str:
    if sample_name in families:
        return sample_name
    for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in families:
            return sample_name[: -len(suffix)]
    return sample_name


def scrape(url: str, *, openmetrics: bool = False) -> Scrape:
    status, text = get(f"{url}/metrics", accept=OPENMETRICS if openmetrics else None)
    assert status == 200, text
    parse = openmetrics_families if openmetrics else text_string_to_metric_families
    families = {f.name: f for f in parse(text)}
    return Scrape(families, text)
