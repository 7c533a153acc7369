"""The gRPC edge of the API process: servicers, interceptors (auth, metrics, errors), TLS, the server."""
