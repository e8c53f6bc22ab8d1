"""``python -m bench``: see bench/cli.py."""

from bench.cli import main

raise SystemExit(main())
