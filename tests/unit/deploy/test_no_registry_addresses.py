"""The repository names no package registry: pip, Maven and apt resolve from their defaults, so a user's own
mirrors and settings apply. A committed address (or a Maven <repository>/<mirror>) would override them."""

import re
import subprocess
from pathlib import Path

from microingest.settings import repo_root

ROOT = repo_root()

REGISTRY_HOSTS = (
    "repo.maven.apache.org",
    "repo1.maven.org",
    "pypi.org",
    "pythonhosted.org",
    "deb.debian.org",
    "security.debian.org",
    "registry.npmjs.org",
    "proxy.golang.org",
    "crates.io",
)
OVERRIDES = re.compile(r"<(repository|mirror|pluginRepository)>|--(extra-)?index-url|^\s*-s\s+\S*settings\.xml")


def tracked_files():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        path = ROOT / name
        if path.is_file() and path.resolve() != Path(__file__).resolve():
            yield name, path


def test_no_registry_address_or_override_is_committed():
    found = []
    for name, path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{name}: {host}" for host in REGISTRY_HOSTS if host in text]
        found += [f"{name}: {m.group(0).strip()}" for m in OVERRIDES.finditer(text)]
    assert not found, "registry addresses or overrides committed:\n" + "\n".join(found)
    assert not any(name.endswith("settings.xml") for name, _ in tracked_files())
