"""``python -m cli ...``: the same as the ``minikafka`` console script."""

import sys

from cli.main import main

sys.exit(main())
