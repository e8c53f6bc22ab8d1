"""Whether a test failed, for fixtures that print logs at teardown when it did.

tests/conftest.py keeps each phase's report on the test item (``rep_setup``, ``rep_call``,
``rep_teardown``, as pytest's documentation suggests); a fixture's own teardown runs before
``rep_teardown`` exists, so a failure is one of set-up or call.
"""

from __future__ import annotations

from typing import Any


def failed(node: Any) -> bool:
    """Did the set-up or the call of test ``node`` fail (so far)?"""
    return any(getattr(node, f"rep_{when}", None) is not None and getattr(node, f"rep_{when}").failed
               for when in ("setup", "call"))
