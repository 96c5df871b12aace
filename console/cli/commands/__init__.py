"""Command families of the CLI; each module has `register(subparsers, parents)`."""
