"""The one service layer the TUI and the CLI share. Never imports textual."""
