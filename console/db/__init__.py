"""Database code: opening, transactions, release detection, migrations, snapshots. No UI here."""
