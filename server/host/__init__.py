"""What every cesar process shares with its host: structured logs and memory figures."""
