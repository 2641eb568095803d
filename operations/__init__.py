"""Background work that a fault can lose, for every app: the event log of what the platform recovered from, the
re-dispatchable rows, `enqueue`, the watchdog with its registry of work kinds, the database-outage wait, the broker
and worker view and the operations page. It sits below the other apps and imports none of them: each app registers
its own kind of lost work, and what its events are about, in its AppConfig.ready()."""
