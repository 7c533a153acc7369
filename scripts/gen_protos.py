"""Generate the Python stubs of protos/ into the client package.

One command, used by developers and by CI:

    python scripts/gen_protos.py            # write clients/python/src
    python scripts/gen_protos.py --check    # fail if the committed output is stale

protoc is grpcio-tools pinned in ``requirements/protoc.txt``, installed on first use into a
virtualenv of its own (``~/.cache/socialgraph/tools/protoc-HASH``, another when the file changes). Generated code
requires a protobuf runtime at least as new as the protoc that wrote it and grpcio at least as new
as grpcio-tools, so an older toolchain than the project's own keeps the client's dependency floors
low (``clients/python/pyproject.toml``). The ``.pyi`` type stubs come from the mypy-protobuf
plugins of the environment running this script (the project's ``.venv``): a plugin is a program
of its own, and mypy-protobuf 5 needs a protobuf runtime newer than grpcio-tools 1.66 allows.
"""

from __future__ import annotations

import argparse
import fcntl
import filecmp
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from socialgraph_devstack.install import tools_cache

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
OUT = ROOT / "clients" / "python" / "src"
PACKAGE_DIR = Path("socialgraph") / "v1"
TOOL_REQUIREMENTS = ROOT / "requirements" / "protoc.txt"


def _stamp() -> str:
    return hashlib.sha256(TOOL_REQUIREMENTS.read_bytes()).hexdigest()


def _tool_dir() -> Path:
    """The tool virtualenv's folder: once a machine, for every checkout, named by the requirements'
    hash, beside the test tools (``socialgraph_devstack.install.tools_cache()``)."""
    return tools_cache() / f"protoc-{_stamp()[:16]}"


def _installed() -> Path | None:
    """The tool virtualenv's python if it was installed from the current requirements file."""
    tool_dir = _tool_dir()
    python = tool_dir / "venv" / "bin" / "python"
    try:
        stamped = (tool_dir / "installed").read_text("utf-8").strip()
    except OSError:
        return None
    return python if stamped == _stamp() and python.exists() else None


def protoc_python() -> Path:
    """The python of the tool virtualenv, installing it first if it is missing or out of date. One
    install at a time: a second caller waits for the first."""
    found = _installed()
    if found is not None:
        return found
    tool_dir = _tool_dir()
    tool_dir.mkdir(parents=True, exist_ok=True)
    with (tool_dir / ".install-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _installed()  # installed by whoever held the lock before
        if found is not None:
            return found
        print(f"installing protoc ({TOOL_REQUIREMENTS.relative_to(ROOT)}) into {tool_dir}", file=sys.stderr)
        (tool_dir / "installed").unlink(missing_ok=True)
        shutil.rmtree(tool_dir / "venv", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tool_dir / "venv")], check=True)
        python = tool_dir / "venv" / "bin" / "python"
        install = ["install", "--quiet", "--no-deps", "-r", str(TOOL_REQUIREMENTS)]
        uv = Path(sys.executable).parent / "uv"  # the project's (scripts/bootstrap.sh installs it); pip is the fallback
        if uv.exists():
            subprocess.run([str(uv), "pip", *install, "--python", str(python)], check=True)
        else:
            subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *install], check=True)
        (tool_dir / "installed").write_text(_stamp() + "\n", "utf-8")
    found = _installed()
    if found is None:
        raise RuntimeError(f"protoc's virtualenv is missing after its install into {tool_dir}")
    return found


def generate(out: Path) -> None:
    """Run protoc (grpcio-tools of the tool virtualenv) with the mypy-protobuf plugins into ``out``."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    bindir = Path(sys.executable).parent
    cmd = [
        str(protoc_python()),
        "-m",
        "grpc_tools.protoc",  # adds the include path of google/protobuf/*.proto itself
        f"-I{PROTO_ROOT}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--mypy_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_grpc_out={out}",
        *protos,
    ]
    subprocess.run(cmd, check=True, cwd=PROTO_ROOT, stdout=subprocess.DEVNULL)
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
