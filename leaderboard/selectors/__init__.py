"""The leaderboard's reads, one module per concern (no names here: import a read from its module)."""
