"""``python -m spire``: the ``spire`` command."""

from spire.cli import main

raise SystemExit(main())
