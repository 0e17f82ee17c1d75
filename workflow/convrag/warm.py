"""Warm start for local runs: one fork server per Snakemake run keeps torch, transformers,
sentence-transformers, pandas and the project imported, and each `convrag` job forks from it
instead of importing them again (3-6 s of every model or embedding job's start on a laptop
CPU, a fifth of the default run's job-seconds; issue 14).

The job's client (the `convrag ...` of a rule's shell line) hands its argv, working directory,
environment, umask and standard streams (fds 0-2 over SCM_RIGHTS) to the server, which forks;
the child applies them and runs ``convrag.cli.main(argv)`` as a fresh process would, then sends
its exit status. The client forwards SIGINT, SIGTERM and SIGHUP to the child, and a child
whose client vanished (job killed) exits at once. Whenever anything is unusual (no server,
another Python environment, the package's code changed since the server started) the client
runs the stage itself: warm start changes when a job starts computing, never what it computes.

Limits: Snakemake's `benchmark:` files measure a job's process tree, which no longer contains
the forked child, so their memory and CPU columns cover only the client (wall time stays
right); set ``warm_start: false`` for per-job memory. Runs on a cluster executor never use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

ENV = "CONVRAG_WARM_SOCKET"
# Imported once by the server; every name is optional (an extra that is not installed is skipped).
PRELOAD = (
    "numpy", "pandas", "pyarrow.parquet", "scipy.stats", "yaml", "jsonschema",
    "torch", "transformers", "transformers.activations", "transformers.modeling_utils",
    "transformers.models.llama.modeling_llama", "transformers.models.bert.modeling_bert",
    "sentence_transformers", "faiss", "bm25s", "matplotlib.figure", "matplotlib.backends.backend_agg",
    "convrag.cli", "convrag.llm.backends.transformers_backend", "convrag.retrieval.dense",
)
_HEADER = struct.Struct("!Q")


def fingerprint() -> str:
    """Names, sizes and modification times of the package's Python files: a server started
    before an edit must not run the old code."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(d, f))
                h.update(f"{os.path.relpath(os.path.join(d, f), root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _identity() -> dict:
    return {"prefix": sys.prefix, "executable": os.path.realpath(sys.executable), "fingerprint": fingerprint()}


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


def _readline(conn: socket.socket) -> str:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode().strip()


# ---- client -----------------------------------------------------------------------------


def delegate(argv: list[str]) -> int | None:
    """Run ``convrag argv`` in the run's warm server; None when the stage must run here."""
    path = os.environ.get(ENV)
    if not path:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None  # no server (it idled out, or this job runs elsewhere): a cold start
    with conn:
        from convrag.io import process_umask  # light: json, tempfile, pathlib

        req = json.dumps({**_identity(), "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                          "umask": process_umask()}).encode()
        try:
            socket.send_fds(conn, [_HEADER.pack(len(req))], [0, 1, 2])
            conn.sendall(req)
            status = _readline(conn).split()
        except OSError:
            return None
        if len(status) != 2 or status[0] != "ok":
            return None  # refused (another environment, changed code): a cold start
        pid = int(status[1])

        def forward(signum, _frame):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, forward)
        while True:
            try:
                line = _readline(conn)
                break
            except InterruptedError:
                continue
        if line.startswith("exit "):
            return int(line.split()[1])
        print(f"convrag: the job's warm process {pid} ended without an exit status (killed by a signal?)",
              file=sys.stderr)
        return 1


# ---- server -----------------------------------------------------------------------------


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _threads(env: dict, default: int) -> None:
    """The thread counts a fresh process would take from the job's environment."""
    raw = env.get("OMP_NUM_THREADS", "")
    n = int(raw) if raw.isdigit() and int(raw) > 0 else None
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n or default)
    if n:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(n)
        except ImportError:
            pass


def _run_child(conn: socket.socket, fds: list[int], req: dict, entry, torch_default: int) -> None:
    """In the forked child: become the job, run it, report its exit status, never return."""
    code = 1
    try:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdout.reconfigure(line_buffering=os.isatty(1))
        os.chdir(req["cwd"])
        if isinstance(req.get("umask"), int):  # the client's, for open() and convrag.io's outputs alike
            from convrag.io import adopt_umask

            adopt_umask(req["umask"])
        os.environ.clear()
        os.environ.update(req["env"])
        _threads(req["env"], torch_default)
        sys.argv = ["convrag", *req["argv"]]
        conn.sendall(f"ok {os.getpid()}\n".encode())  # before any "exit": the client reads them in order

        def watchdog():  # the client never sends after its request: EOF means the job was killed
            try:
                conn.recv(1)
            finally:
                os._exit(143)

        threading.Thread(target=watchdog, daemon=True).start()
        try:
            code = entry(req["argv"])
        except SystemExit as e:
            code = _exit_code(e)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        code = 0 if code is None else int(code)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        try:
            conn.sendall(f"exit {code}\n".encode())
        except OSError:
            pass
        os._exit(code)


def serve(path: str, idle_s: float = 900.0, preload=PRELOAD, entry: str = "convrag.cli:main") -> None:
    """Import ``preload``, listen on ``path`` and fork one child per request until idle."""
    import importlib

    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    module, func = entry.split(":")
    entry_fn = getattr(importlib.import_module(module), func)
    torch_default = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else 1
    me = _identity()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.{os.getpid()}"
    srv.bind(tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)  # the socket appears only once the server is ready
    srv.listen(64)
    srv.settimeout(idle_s)
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                return
            fds: list[int] = []
            try:
                conn.settimeout(30)
                head, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
                req = json.loads(_recv_exact(conn, _HEADER.unpack(head)[0]))
                conn.settimeout(None)
                if any(req.get(k) != me[k] for k in me) or len(fds) != 3:
                    conn.sendall(b"no mismatch\n")
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    srv.close()
                    _run_child(conn, fds, req, entry_fn, torch_default)
                print(f"{time.strftime('%H:%M:%S')} job {pid}: convrag {' '.join(req['argv'][:2])}", flush=True)
            except (OSError, ValueError, ConnectionError) as e:
                print(f"warm server: request dropped: {e}", file=sys.stderr)
            finally:
                for fd in fds:
                    os.close(fd)
                conn.close()
    finally:
        srv.close()
        try:
            if os.path.exists(path):
                os.unlink(path)
        except OSError:
            pass


# ---- the run's server, started and stopped by the Snakefile's hooks ----------------------


class RunServer:
    """One server per Snakemake run (its socket is named after the Snakemake process)."""

    def __init__(self, enabled: bool, log_path: str):
        self.enabled = enabled
        self.log_path = log_path
        self.path = os.path.join(tempfile.gettempdir(), f"convrag-warm-{os.getuid()}-{os.getpid()}.sock")
        self.proc = None

    def start(self) -> None:
        if not self.enabled or self.proc is not None:
            return
        import atexit
        import subprocess

        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "convrag.warm", self.path], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
        os.environ[ENV] = self.path  # jobs started from now on inherit it; until the socket exists they start cold
        atexit.register(self.stop)

    def stop(self) -> None:
        os.environ.pop(ENV, None)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
        self.proc = None


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m convrag.warm", description=__doc__.split("\n\n")[0])
    p.add_argument("socket", help="the Unix socket to listen on")
    p.add_argument("--idle", type=float, default=900.0, help="exit after this many seconds without a request")
    p.add_argument("--entry", default="convrag.cli:main", help="module:function run in each child with argv")
    p.add_argument("--preload", nargs="*", default=None, help="modules to import first (default: the project's)")
    a = p.parse_args(argv)
    from convrag import lifeline

    # ends with the Snakemake run that started it (killed, crashed), from preloading on, and
    # takes its socket along
    lifeline.watch("the warm server", cleanup=lambda: os.path.exists(a.socket) and os.unlink(a.socket))
    t0 = time.perf_counter()
    print(f"warm server {os.getpid()}: preloading", file=sys.stderr, flush=True)
    serve(a.socket, a.idle, PRELOAD if a.preload is None else a.preload, a.entry)
    print(f"warm server {os.getpid()}: stopped after {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
