"""Mounting: opening Capsem files read-only and attaching them to Datasette on demand."""
