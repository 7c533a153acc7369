"""The service layer: every rule of the graph and the home timeline, over role interfaces.

Transport-free (it speaks in ints, domain models and domain errors; ``graph_service/api`` speaks
gRPC) and storage-free (it decides; the adapters behind ``domain/ports.py`` store and fetch).
One module per capability: follows, requests and privacy, blocks, mutes, the graph's reads,
known followers and mutuals, suggestions, the home timeline, and paging.
"""
