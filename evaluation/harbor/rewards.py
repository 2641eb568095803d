"""Harbor's own reward for an imported trial: kept on the run beside the platform's verdict, shown, never used."""

from __future__ import annotations

NO_REWARD = object()  # the run is not an imported Harbor job


def reward_key(snippet_id: int, sample: int) -> str:
    """Where an item's reward sits in the run's `params["harbor"]["rewards"]`."""
    return f"{snippet_id}/{sample}"


def harbor_reward(*, params: dict, snippet_id: int, sample: int):
    """The reward Harbor's verifier gave the item (a number, or None when it gave none), or NO_REWARD when the run
    is not an imported Harbor job."""
    harbor = (params or {}).get("harbor")
    if not isinstance(harbor, dict):
        return NO_REWARD
    return (harbor.get("rewards") or {}).get(reward_key(snippet_id, sample))
