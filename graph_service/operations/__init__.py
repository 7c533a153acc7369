"""Operator commands over the stored graph: ``reconcile``, ``fsck`` and ``import`` (SPEC §7.3).

They run beside the service (same tables, same cache) as one-off processes; the CLI entry points in
``graph_service/entrypoints`` parse arguments and print, the modules here do the work.
"""
