"""The peers' environments: where they live, and what a missing one says."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.crosscheck.envs import PINS, env_dir, find_peer
from kvlab.errors import ConfigError


def test_pins_and_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert (PINS["guidellm"].version, PINS["aiperf"].version) == ("0.8.1", "0.13.0")
    assert PINS["guidellm"].first == ("torch==2.13.0",)  # the CPU build before GuideLLM
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert env_dir(PINS["aiperf"]) == tmp_path / "kvlab" / "peers" / "aiperf-0.13.0"


def test_a_missing_peer_names_the_command_that_installs_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KVLAB_AIPERF", raising=False)
    with pytest.raises(ConfigError, match=r"aiperf 0.13.0 is not installed.*kvlab peers "
                                          r"setup.*KVLAB_AIPERF"):
        find_peer("aiperf")
    monkeypatch.setenv("KVLAB_AIPERF", str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match=r"\$KVLAB_AIPERF names .*not an executable"):
        find_peer("aiperf")


def test_kvlabs_own_environment_has_none_of_the_peers() -> None:
    """Their pins never reach kvlab's environment: neither package is installed in it."""
    from importlib import metadata

    for pin in PINS.values():
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version(pin.package)
