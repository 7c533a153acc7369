"""Home timelines in Redis: the layout, the merge scripts and the store the fanout and the read path use."""
