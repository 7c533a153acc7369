"""The one place the client's version is written (``pyproject.toml`` reads it from here).

The major version is the API's: ``1.x`` speaks ``socialgraph.v1``. A release that adds RPCs or
fields to the protos raises the minor version (``tests/unit/client/test_version.py`` holds this
file to the protos through ``API_FINGERPRINT``); a fix to the client alone raises the patch.
"""

__all__ = ["API_FINGERPRINT", "API_PACKAGE", "__version__"]

__version__ = "1.3.0"
API_PACKAGE = "socialgraph.v1"
"""The proto package this client speaks; its version number is the client's major version."""
API_FINGERPRINT = "cef321f5da606096"
"""SHA-256 (first 16 hex digits) of the ``.proto`` files this version was cut from. A test fails
when the protos change and this does not: raise the minor version, then set the new fingerprint."""
