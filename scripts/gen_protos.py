"""Generate the Python stubs of protos/ into the client package.

One command, used by developers and by CI:

    python scripts/gen_protos.py            # write clients/python/src
    python scripts/gen_protos.py --check    # fail if the committed output is stale
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc_tools

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
OUT = ROOT / "clients" / "python" / "src"
PACKAGE_DIR = Path("socialgraph") / "v1"


def generate(out: Path) -> None:
    """Run protoc (from grpcio-tools) with the mypy-protobuf plugins into ``out``."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    bindir = Path(sys.executable).parent
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--mypy_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_grpc_out={out}",
        *protos,
    ]
    subprocess.run(cmd, check=True, cwd=PROTO_ROOT)
    for package in {out / PACKAGE_DIR, out / PACKAGE_DIR.parent}:
        (package / "__init__.py").touch()
    (out / PACKAGE_DIR.parent / "py.typed").touch()


def generated_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / PACKAGE_DIR.parent).rglob("*") if p.is_file())


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want, have = generated_files(fresh), generated_files(OUT)
        stale = [str(p) for p in want if p not in have or not filecmp.cmp(fresh / p, OUT / p, shallow=False)]
        stale += [f"{p} (not produced by protos/)" for p in have if p not in want and p.suffix != ".pyc"]
    if stale:
        print("generated code is stale; run: python scripts/gen_protos.py", *stale, sep="\n  ")
        return 1
    print("generated code matches protos/")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    if parser.parse_args().check:
        return check()
    shutil.rmtree(OUT / PACKAGE_DIR.parent, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    generate(OUT)
    print(f"wrote {OUT / PACKAGE_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
