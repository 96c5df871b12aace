"""`python -m console` behaves exactly like the `archon-console` script."""

from console.cli import main

raise SystemExit(main())
