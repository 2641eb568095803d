"""Registered models, runs, generations, outcomes, scoring and the leaderboard (see issue 3)."""
