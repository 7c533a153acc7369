"""The ``tweets`` table: posting and author lookups."""
