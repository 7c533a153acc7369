"""socialgraph: the gRPC service that owns the follow graph."""
