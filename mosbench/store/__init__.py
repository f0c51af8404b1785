"""The results store: runs and their points in SQLite or PostgreSQL, schema and migrations."""
