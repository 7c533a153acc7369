"""Home timelines: their Redis layout, the read path (TimelineService) and its gRPC servicer."""
