"""Answer corpora as data: hostile answers (each must pass unguarded and never pass through the platform) and
honest respellings (each must pass with no finding). `tasks.py` loads the tasks they are spliced into."""
