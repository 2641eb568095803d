"""Agent runs (issue 23): the model works on an item over many turns in a sandbox workspace, within a budget.

budget: what a run may spend per item; workspace: the item's files on the worker's disk and the answer read back;
tools: what the model may call; policies: who decides the next turn (a model through litellm, or a calibration
script); loop: the turns, each stored as it happens; tasks: the Celery entry point, scoring on the single-shot path.
"""
