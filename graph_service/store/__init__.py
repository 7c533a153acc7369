"""The edge store on DynamoDB: item layout, the graph store, its stream records, the counters table."""
