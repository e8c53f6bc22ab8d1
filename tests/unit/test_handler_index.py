"""broker.handlers.index: the handler modules load on first use, and the index agrees with them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker.handlers import HANDLER_MODULES, REGISTRY, load_all
from broker.handlers.base import api
from broker.handlers.index import HANDLER_INDEX
from protocol.messages.api_versions import ApiVersionsRequest

pytestmark = pytest.mark.timeout(60)


def defining_module(filename: str) -> str:
    """broker/handlers/x.py -> broker.handlers.x (a build may come from another checkout)."""
    return ".".join(Path(filename).with_suffix("").parts[-3:])


def test_every_module_registers_what_the_index_says() -> None:
    load_all()
    assert sorted(HANDLER_MODULES) == sorted(set(HANDLER_MODULES))  # one key per module
    for key, entry in HANDLER_INDEX.items():
        spec = REGISTRY[key]
        assert spec.api_key == key
        # The module that defines the handler. mypyc's function objects for decorated
        # functions (the handlers it compiles: protocol.native) have __module__ None; their
        # code object still names the file they were compiled from.
        module = spec.handler.__module__ or defining_module(spec.handler.__code__.co_filename)
        assert module == f"broker.handlers.{entry.module}"
        assert (spec.min_version, spec.max_version) == (entry.min_version, entry.max_version)
        assert spec.request.__name__ == f"{entry.name}Request"
        assert key == spec.request.API_KEY
    assert REGISTRY.ranges() == [(k, e.min_version, e.max_version)
                                 for k, e in sorted(HANDLER_INDEX.items())]


def test_a_registration_that_disagrees_with_the_index_is_refused() -> None:
    entry = HANDLER_INDEX[18]
    with pytest.raises(RuntimeError, match="index lists"):
        api(18, min_version=entry.min_version, max_version=entry.max_version + 1,
            request=ApiVersionsRequest)(lambda ctx, req: None)  # type: ignore[arg-type,return-value]


_PROBE = """
import json, sys
import broker.server
from broker.handlers import REGISTRY
before = sorted(m for m in sys.modules if m.startswith(("broker.handlers.", "protocol.messages.")))
ranges = REGISTRY.ranges()
spec = REGISTRY[0]
after = sorted(m for m in sys.modules if m.startswith("broker.handlers."))
print(json.dumps([before, len(ranges), spec.handler.__name__, after]))
"""


def test_the_broker_imports_handlers_only_when_their_keys_are_used() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    before, ranges, produce, after = json.loads(out)
    assert ranges == len(HANDLER_INDEX)  # advertised without loading
    handlers = [m for m in before if m.startswith("broker.handlers.")]
    assert "broker.handlers.produce" not in handlers
    assert "broker.handlers.describe_acls" not in handlers
    assert "protocol.messages.describe_acls" not in before
    assert produce == "handle_produce"
    assert "broker.handlers.produce" in after
