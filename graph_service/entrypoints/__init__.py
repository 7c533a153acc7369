"""Entry points: the ``socialgraph`` command and one builder per process (the composition root)."""
