"""Jobs end with the Snakemake run that started them.

A local Snakemake run starts each job as a shell child and the warm server (convrag.warm) in a
session of its own. Sent SIGTERM or SIGINT alone, Snakemake stops scheduling but waits for the
running jobs; killed outright (``kill -9``, the OOM killer, a closed terminal), it leaves its
children re-parented and working for nobody: a simulate job for many minutes, the warm server
for its 900 s idle time, each holding its model in memory.

So the Snakefile stops the jobs itself on SIGTERM and SIGINT (``end_jobs_on_signal``), and it
names the run's owner in the environment (``CONVRAG_RUN_OWNER``: host, pid and start time of
the Snakemake process, so a recycled pid is not taken for it): every ``convrag`` process it
starts, and the warm server, watches that process from a daemon thread. When the owner is
gone, the watcher stops the process's own children (a model server it started, say) and ends
the process with status 143, as SIGTERM would. A job on another host (a cluster executor) or
a process started by hand carries no owner of its host and is never watched.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

ENV = "CONVRAG_RUN_OWNER"
POLL_S = 0.5


def token(pid: int) -> str | None:
    """``host:pid:start`` of a live process, or None when it does not exist."""
    import psutil

    try:
        return f"{socket.gethostname()}:{pid}:{psutil.Process(pid).create_time():.2f}"
    except psutil.Error:
        return None


def _parse(value: str) -> tuple[str, int, str] | None:
    try:
        host, pid, start = value.rsplit(":", 2)
        return host, int(pid), start
    except ValueError:
        return None


def owner_alive(value: str) -> bool:
    """Whether the process a token names still runs (a token of another host: assumed so)."""
    parsed = _parse(value)
    if parsed is None:
        return True  # not ours to judge: never stop a job over a value we cannot read
    host, pid, _ = parsed
    if host != socket.gethostname():
        return True
    return token(pid) == value


def claim(local_main: bool) -> None:
    """Called by the Snakefile in every Snakemake process that parses it. The main process of a
    local run names itself the owner, unless an ancestor already owns the run (Snakemake's own
    subprocesses re-read the Snakefile); a process on a cluster node claims nothing and clears
    an owner inherited from the submitting host."""
    import psutil

    current = os.environ.get(ENV)
    if current:
        parsed = _parse(current)
        if parsed and parsed[0] == socket.gethostname() and owner_alive(current):
            ancestors = {p.pid for p in psutil.Process().parents()}
            if parsed[1] in ancestors:
                return
    if local_main:
        os.environ[ENV] = token(os.getpid()) or ""
    else:
        os.environ.pop(ENV, None)


def stop_children(timeout: float = 3.0) -> None:
    """SIGTERM to every descendant of this process, SIGKILL to those still there after
    ``timeout`` seconds."""
    import psutil

    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for k in kids:
        try:
            k.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kids, timeout=timeout)
    for k in alive:
        try:
            k.kill()
        except psutil.Error:
            pass


def end_jobs_on_signal(signals=(signal.SIGTERM, signal.SIGINT)) -> None:
    """In the Snakemake process of a local run: on SIGTERM or SIGINT sent to it alone, stop its
    jobs (and the warm server) first, then do what Snakemake does. Left to itself, Snakemake
    stops scheduling on either signal but waits for the running jobs, which on a laptop can be
    many minutes of work nobody will use; its own handler then finds them failed and exits,
    removing their outputs. (Ctrl-C in a terminal reaches the jobs directly as well.)"""
    for s in signals:
        try:
            previous = signal.getsignal(s)
        except ValueError:
            continue

        def handler(signum, frame, previous=previous):
            stop_children(timeout=5.0)
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        try:
            signal.signal(s, handler)
        except ValueError:  # not the main thread: Snakemake's own handling stays
            pass


def watch(what: str = "this job", cleanup=None) -> threading.Thread | None:
    """Start the watcher when this process belongs to a local Snakemake run; None otherwise.
    ``cleanup()`` runs before the process ends (the warm server removes its socket)."""
    value = os.environ.get(ENV)
    if not value or _parse(value) is None or _parse(value)[0] != socket.gethostname():
        return None
    if not owner_alive(value):  # already gone: started by an orphan, end now
        _end(value, what, cleanup)

    def loop() -> None:
        import time

        while owner_alive(value):
            time.sleep(POLL_S)
        _end(value, what, cleanup)

    t = threading.Thread(target=loop, name="convrag-lifeline", daemon=True)
    t.start()
    return t


def _end(value: str, what: str, cleanup=None) -> None:
    pid = _parse(value)[1]
    try:
        print(f"convrag: the Snakemake run that started {what} (pid {pid}) has ended; stopping {what}",
              file=sys.stderr, flush=True)
    except Exception:
        pass
    stop_children()
    if cleanup is not None:
        try:
            cleanup()
        except Exception:
            pass
    os._exit(143)
