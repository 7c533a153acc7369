"""The gRPC API process: servicers, the service layer with the graph rules, interceptors, the server."""
