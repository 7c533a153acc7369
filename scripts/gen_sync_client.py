"""Write the blocking client (``sync.py``) from the asyncio one (``aio.py``), so an RPC is added once.

    python scripts/gen_sync_client.py            # write clients/python/src/socialgraph_client/sync.py
    python scripts/gen_sync_client.py --check    # fail if the committed file is stale

The rewrite is textual (as unasync does it): ``async``/``await`` go, the asyncio transport becomes
the blocking one, the class and iterator names lose ``Async``; ruff then sorts the imports and
formats the result.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "clients" / "python" / "src" / "socialgraph_client"
SOURCE = PACKAGE / "aio.py"
TARGET = PACKAGE / "sync.py"

HEADER = '''"""``SocialGraphClient``: the blocking client, one method per RPC (thread-safe: Django, Celery, scripts).

Generated from ``aio.py`` by ``scripts/gen_sync_client.py``: edit that file, then run the script.
"""
'''

RULES: tuple[tuple[str, str], ...] = (
    (r"\baio_transport\b", "sync_transport"),
    (r"\bAsyncTransport\b", "SyncTransport"),
    (r"\bAsyncSocialGraphClient\b", "SocialGraphClient"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\basync (def|with|for) ", r"\1 "),
    (r"\bawait ", ""),
)


def render() -> str:
    text = SOURCE.read_text()
    docstring = re.match(r'^""".*?"""\n', text, re.DOTALL)
    assert docstring is not None, "aio.py starts with its docstring"
    text = HEADER + text[docstring.end() :]
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text)
    ruff = str(Path(sys.executable).parent / "ruff")
    for command in (["check", "--fix", "--select", "I", "--quiet"], ["format"]):
        text = subprocess.run(
            [ruff, *command, "--stdin-filename", str(TARGET), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    wanted = render()
    if parser.parse_args().check:
        if not TARGET.exists() or TARGET.read_text() != wanted:
            print(f"{TARGET.relative_to(ROOT)} is stale; run: python scripts/gen_sync_client.py")
            return 1
        print(f"{TARGET.relative_to(ROOT)} matches aio.py")
        return 0
    TARGET.write_text(wanted)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
