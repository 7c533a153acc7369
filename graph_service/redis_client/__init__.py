"""Redis plumbing shared by the graph cache and the timelines: building a client, classifying failures."""
