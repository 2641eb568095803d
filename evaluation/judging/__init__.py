"""The one step from an answer to its verdict (DESIGN.md): the sealed replay's comparison lives here."""
