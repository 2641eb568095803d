"""Background work that a fault can lose, for every app: the event log of what the platform recovered from, the
re-dispatchable rows, `enqueue`, the watchdog with its registry of work kinds, the database-outage wait, and the
broker and worker view that the operations page shows (the page's view stays beside the maintainers' guard). It sits
below the other apps and imports none of them: each app registers its own kind of lost work, and how its events'
subjects are shown, in its AppConfig.ready()."""
