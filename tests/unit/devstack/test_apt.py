"""apt-get runs as root, or through sudo for a user with sudo rights (the README's fresh machine)."""

from __future__ import annotations

import pytest
from socialgraph_devstack import install
from socialgraph_devstack.install import apt_get


def test_root_runs_apt_get_itself() -> None:
    assert apt_get("install", "-y", "redis-server", root=True) == ["apt-get", "install", "-y", "redis-server"]


def test_another_user_goes_through_sudo_with_the_non_interactive_front_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert apt_get("update", "-qq", root=False) == [
        "sudo",
        "DEBIAN_FRONTEND=noninteractive",
        "apt-get",
        "update",
        "-qq",
    ]


def test_without_sudo_the_error_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get update needs root: run as root, or install sudo"):
        apt_get("update", root=False)
