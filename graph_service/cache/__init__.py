"""Write-through Redis caches: follow state, adjacency lists and counts."""
