"""Harbor interchange: a release exported as Harbor tasks (export.py, scored in Harbor's container by verify.py)."""
