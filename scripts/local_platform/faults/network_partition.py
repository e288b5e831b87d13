"""Network partitions between parts of the cluster topology on loopback: nftables rules that drop the packets a
service's processes send to some ports, the service told by its cgroup (every process a service starts is in it, see
scripts/local_platform/process_tree.py). Dropped, not refused: the sender sees a silent network, as with a cut cable,
and finds out only by its own timeouts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TABLE = "microingest_soak"


def available() -> bool:
    return shutil.which("nft") is not None


def _nft(*args: str) -> None:
    subprocess.run(["nft", *args], check=True, capture_output=True, text=True, timeout=30)


def _selector(group: Path) -> tuple[int, str]:
    """nft's `socket cgroupv2 level N "path"`: the path from /sys/fs/cgroup (where nft looks it up), the level from
    the cgroup v2 root (which may be mounted below it, as /sys/fs/cgroup/unified)."""
    mount = next(
        Path(line.split()[1])
        for line in Path("/proc/mounts").read_text().splitlines()
        if line.split()[2] == "cgroup2" and group.is_relative_to(line.split()[1])
    )
    return len(group.relative_to(mount).parts), str(group.relative_to("/sys/fs/cgroup"))


def cut(groups: list[Path], ports: list[int]) -> None:
    """Drop every packet the processes of these cgroups send to these loopback ports, until heal()."""
    _nft("add", "table", "inet", TABLE)
    _nft("add", "chain", "inet", TABLE, "out", "{ type filter hook output priority 0; policy accept; }")
    port_set = "{ " + ", ".join(str(p) for p in ports) + " }"
    for group in groups:
        level, path = _selector(group)
        _nft(
            "add",
            "rule",
            "inet",
            TABLE,
            "out",
            "socket",
            "cgroupv2",
            "level",
            str(level),
            f'"{path}"',
            "tcp",
            "dport",
            port_set,
            "counter",
            "drop",
        )


def dropped() -> int:
    """Packets dropped by the partition so far (0 once healed)."""
    out = subprocess.run(["nft", "list", "table", "inet", TABLE], capture_output=True, text=True, timeout=30).stdout
    return sum(int(line.split("packets", 1)[1].split()[0]) for line in out.splitlines() if "packets" in line)


def heal() -> None:
    subprocess.run(["nft", "delete", "table", "inet", TABLE], capture_output=True, text=True, timeout=30)
