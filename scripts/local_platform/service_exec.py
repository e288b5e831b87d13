"""What supervisord runs for each service of the local platform: the one step supervisord cannot take for us.

    service_exec.py NAME RUN_DIR

supervisord stops, kills and restarts a service's process group. A process that leaves the group outlives its service:
a scheduler's LocalExecutor workers call setsid and ignore SIGTERM, so a scheduler killed with kill -9 used to leave
them running beside the new one. So each service runs in a cgroup v2 group of its own when this user may make one
(nothing leaves a cgroup), and is otherwise known by the MICROINGEST_SERVICE variable its processes inherit or as an
orphan handed to supervisord (process_tree.py); before it starts, whatever its previous run left behind is killed.
processes.stop() sweeps the same way after supervisord has stopped a service.

Then this process becomes the service: the command and environment spawn() wrote to RUN_DIR/NAME.json (a file only its
owner reads, as the environment holds the platform's credentials), its pid in RUN_DIR/NAME.pid.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by supervisord as a script

from local_platform import supervisord
from local_platform.process_tree import TAG, kill_all, left_behind, service_cgroup, tag_of


def _left(name: str, run_dir: Path) -> list[int]:
    """What the service's previous run left; orphans only when our parent is the platform's supervisord (a program it
    is starting meanwhile carries supervisord's tag, which keeps it out)."""
    supervisor, programs = supervisord.pids(run_dir)
    return left_behind(run_dir, name, supervisor if supervisor == os.getppid() else None, programs)


def sweep_previous_run(name: str, run_dir: Path) -> None:
    """Kill what the service's previous run left: in its cgroup, or else by its tag and its untagged orphans handed
    to supervisord (our parent; with every service's processes below its main one while it lives, an orphan is what
    is left of one that died)."""
    left = _left(name, run_dir)
    if not left:
        return
    print(f"[{name}] killing {len(left)} process(es) left behind by its previous run: {left}", flush=True)
    kill_all(left, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _left(name, run_dir) and time.monotonic() < deadline:
        time.sleep(0.1)


def main() -> None:
    name, run_dir = sys.argv[1], Path(sys.argv[2])
    spec = json.loads((run_dir / f"{name}.json").read_text())
    tag, group = tag_of(run_dir, name), service_cgroup(run_dir, name)
    sweep_previous_run(name, run_dir)
    if group is not None:
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.procs").write_text("0")  # everything exec'd from here on, and all it starts, stays inside
    (run_dir / f"{name}.pid").write_text(str(os.getpid()))
    os.execvpe(spec["argv"][0], spec["argv"], {**spec["env"], TAG: tag})


if __name__ == "__main__":
    main()
