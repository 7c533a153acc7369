"""The graph on DynamoDB: item layout, the graph store, its stream records, the counters table."""
