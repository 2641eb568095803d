"""Papers, tasks, snippets and benchmark versions; paper2code/ holds the pure format library."""
