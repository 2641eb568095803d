"""Author submissions, revisions, validation reports and reviews (see issue 4)."""
