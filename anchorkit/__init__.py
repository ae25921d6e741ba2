"""anchorkit: anchor every chunk of Redmine tickets to its ticket ID, publish for RAG, and prove it."""

__version__ = "0.1.0"
