"""`python -m console` behaves exactly like the `archon-console` script."""

from console.cli.cli import main

raise SystemExit(main())
