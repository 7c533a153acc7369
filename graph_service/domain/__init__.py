"""The domain: values, errors, identifiers and the role interfaces (ports) of the adapters.
It imports nothing else of the project."""
