"""``python -m bench``'s ``--p4-rates``: P4's rates, one report row each."""

from __future__ import annotations

import pytest

from bench.cli import parse_args, parse_rates
from bench.context import FULL, QUICK


def test_p4_runs_the_issue_rates_by_default_and_one_rate_in_quick_mode() -> None:
    assert FULL.p4_rates == (10_000, 50_000)
    assert QUICK.p4_rates == (10_000,)
    assert parse_args([]).p4_rates is None  # the sizes' default applies


def test_p4_rates_are_taken_in_the_order_given() -> None:
    assert parse_args(["--p4-rates", "50000, 10000,2000"]).p4_rates == (50_000, 10_000, 2_000)
    assert parse_rates("10000") == (10_000,)


@pytest.mark.parametrize("text", ["", "0", "-5", "10000,10000", "1000001", "ten"])
def test_bad_p4_rates_are_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--p4-rates", text])
    assert "--p4-rates" in capsys.readouterr().err
