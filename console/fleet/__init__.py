"""Fleet mode: one console over many archon hosts, through the operator's own OpenSSH (docs/fleet.md)."""
