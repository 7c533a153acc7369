"""The graph cache on Redis and the read-through / write-through wrappers around the graph store."""
