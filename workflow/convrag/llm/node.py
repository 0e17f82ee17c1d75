"""One loaded local model per node, shared by the consecutive jobs that use it.

Why: every GPU job of a paper grid (about 1,080 lic_rag simulate jobs) built its own vLLM
engine, and the load (engine start, CUDA graphs, weights: about 1.8 of the 5.7 minutes the
estimate gives a llama-3.1-8b job) was paid again by the next job of the same model on the same
GPU a second later (issue 47). With ``model_server.mode: node`` (config; passed to the jobs as
$CONVRAG_MODEL_SERVER) a job's local model (backend ``vllm`` or ``transformers``) is a client
of one server process per model and node: the first job that needs the model starts it, the
server loads the model once, and every later job of the same model on that node only connects.
Answers do not change: the server calls the same backend with the same requests (``generate``
batches as the job sends them); the job keeps its cache, accounting and progress. For local runs
(a workstation, or one allocation per node running ``snakemake --cores all``): the Snakefile
sets it only in a local run's main process, because a cluster executor's job is an allocation
of its own whose processes end with it (profiles/slurm).

The server listens on a Unix socket in a folder only the user can open ($CONVRAG_MODEL_SERVER_DIR,
default ``<tmp>/convrag-models-<uid>``), named by a hash of the model's registry entry, the
visible GPUs, the SLURM allocation, the Python environment and the package's code (a server
started by older code, or for other GPUs, is never reused). One lock file makes sure concurrent
jobs start one server. It stops cleanly (socket removed, backend closed) after
$CONVRAG_MODEL_SERVER_IDLE seconds without a connected job (default 300), on SIGTERM or SIGINT
(the end of a SLURM allocation), and when the local Snakemake run that started it ends
(convrag.lifeline). Calls of several jobs at once are answered one at a time, as one job's
threads already are (convrag.llm.engine).

Under SLURM (profiles/slurm) the jobs of one model are grouped, a few to an allocation, and the
allocation's own Snakemake runs them one after another, each as its own ``srun`` step. A server
started by a step would end with that step (its processes are the step's), so there the
allocation's Snakemake holds a ``Launcher`` ($CONVRAG_MODEL_LAUNCHER): a job asks it to start the
server, which then belongs to the allocation's batch step, outlives the step that asked, serves
the next job of the group and ends with the allocation (or when idle).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from convrag import lifeline
from convrag.errors import ConfigError, ModelError
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response

ENV = "CONVRAG_MODEL_SERVER"  # "node": local models are served per node (config model_server.mode)
DIR_ENV = "CONVRAG_MODEL_SERVER_DIR"  # where the sockets live (config model_server.dir)
IDLE_ENV = "CONVRAG_MODEL_SERVER_IDLE"  # seconds without a job before the server stops
LAUNCHER_ENV = "CONVRAG_MODEL_LAUNCHER"  # a SLURM allocation's launcher socket (Launcher)
DEFAULT_IDLE_S = 300.0
MODES = ("off", "node")
LOCAL_BACKENDS = ("vllm", "transformers")
_OFF = ("", "0", "off", "false", "no")


def mode(value: str | None = None) -> str:
    """``"node"`` or ``"off"``, from ``value`` or else $CONVRAG_MODEL_SERVER."""
    raw = os.environ.get(ENV, "") if value is None else value
    m = str(raw).strip().lower()
    if m in _OFF:
        return "off"
    if m == "node":
        return "node"
    raise ConfigError(f"${ENV}={raw!r}: unknown model server mode (config model_server.mode: off or node)")


def serves(spec: ModelSpec) -> bool:
    """Whether a job's backend for ``spec`` goes through the node's server."""
    return spec.backend in LOCAL_BACKENDS and mode() == "node"


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV, "")
    try:
        v = float(raw) if raw.strip() else DEFAULT_IDLE_S
    except ValueError:
        raise ConfigError(f"${IDLE_ENV}={raw!r}: not a number of seconds (config model_server.idle_s)") from None
    if v <= 0:
        raise ConfigError(f"${IDLE_ENV}={raw!r}: must be > 0 (config model_server.idle_s)")
    return v


def server_dir() -> Path:
    """The sockets' folder, created mode 0700; refused when another user owns it or can enter it
    (a socket there would accept that user's requests)."""
    d = Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / f"convrag-models-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(f"model server folder {d} (${DIR_ENV}, config model_server.dir) must belong to this "
                          f"user with mode 0700 (it has uid {st.st_uid}, mode {oct(st.st_mode & 0o777)})")
    return d


def server_key(spec: ModelSpec) -> str:
    """What a reusable server must share with the job: the model entry (chat-template variables
    included), the GPUs it may use, the allocation, the Python environment and the code."""
    from convrag.warm import fingerprint

    entry = {k: v for k, v in spec.to_dict().items() if k != "_resolved"}  # set once a job loads it
    parts = {"spec": entry, "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
             "slurm_job": os.environ.get("SLURM_JOB_ID"), "prefix": sys.prefix,
             "python": os.path.realpath(sys.executable), "code": fingerprint()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def socket_path(spec: ModelSpec) -> tuple[Path, str]:
    """The socket of ``spec``'s server on this node and its key (a Unix socket path has at most
    107 bytes: the name is the model's first 24 characters and 20 of the key)."""
    key = server_key(spec)
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in spec.name)[:24]
    path = server_dir() / f"{safe}-{key[:20]}.sock"
    if len(os.fsencode(path)) > 107:
        raise ConfigError(f"model server socket {path} is longer than a Unix socket path may be (107 bytes): "
                          f"set model_server.dir (${DIR_ENV}) to a shorter folder")
    return path, key


def _authkey(key: str) -> bytes:
    # not a secret (the folder's mode keeps other users out): it makes a client of another key
    # fail the handshake instead of talking to the wrong model
    return key.encode()


# ---- the job's side -------------------------------------------------------------------------


def make_backend(spec: ModelSpec):
    """The job's backend for ``spec`` (what the engine builds on its first cache miss): a local
    model (vLLM, transformers) through this node's server when $CONVRAG_MODEL_SERVER is
    ``node``, else convrag.llm.backends.make_backend in this process."""
    if serves(spec):
        return NodeBackend(spec)
    from convrag.llm.backends import make_backend as make_local_backend

    return make_local_backend(spec)


class NodeBackend:
    """A job's backend for a model served on this node: ``generate`` as the in-process backend,
    answered by the server (started here when none runs). ``info``: the server's pid, its load
    time and how many jobs it served, for the job's log."""

    def __init__(self, spec: ModelSpec, start_timeout_s: float = 3600.0):
        self.spec = spec
        self.path, self.key = socket_path(spec)
        self._lock = threading.Lock()
        self.on_progress = None  # the engine's progress hook (a backend that reports prompts)
        self.conn = self._connect_or_start(start_timeout_s)
        self.info = self.conn.recv()
        if self.info.get("has_prefill"):  # the engine reads these counters when the backend keeps them
            self.prefill_tokens, self.prefill_seconds = 0, 0.0
        print(f"model server: {spec.name} served by pid {self.info['pid']} on this node (loaded in "
              f"{self.info['load_seconds']:.1f} s, job {self.info['jobs']} of it)", file=sys.stderr, flush=True)

    def _try(self):
        from multiprocessing.connection import Client

        try:
            return Client(str(self.path), family="AF_UNIX", authkey=_authkey(self.key))
        except (FileNotFoundError, ConnectionRefusedError):
            return None

    def _connect_or_start(self, timeout_s: float):
        import fcntl

        conn = self._try()
        if conn is not None:
            return conn
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one starter; the others wait here, then connect
            try:
                conn = self._try()
                if conn is not None:
                    return conn
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()  # a server that died without removing its socket
                return self._start(timeout_s)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _start(self, timeout_s: float):
        spec_file = self.path.with_suffix(".spec.json")
        spec_file.write_text(json.dumps(self.spec.to_dict()), encoding="utf-8")
        log = self.path.with_suffix(".log")
        argv = [sys.executable, "-m", "convrag.llm.node", "--spec", str(spec_file), "--socket", str(self.path),
                "--key", self.key, "--idle-s", str(idle_seconds())]
        if os.environ.get(LAUNCHER_ENV):
            # a SLURM allocation: the allocation's Snakemake starts it, so it outlives this step
            started = launch(argv, log)
            poll, stop = started.poll, started.terminate
        else:
            with open(log, "ab") as out:
                # its own session, no inherited stdout: the job's pipes close when the job ends
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True)
            poll, stop = proc.poll, proc.terminate
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.path.exists():
                conn = self._try()
                if conn is not None:
                    return conn
            if (rc := poll()) is not None:
                tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise ModelError(f"{self.spec.name}: the node's model server exited ({rc}) before "
                                 f"listening; its log {log} ends:\n{tail}")
            time.sleep(0.2)
        stop()
        raise ModelError(f"{self.spec.name}: the node's model server did not listen within {timeout_s:.0f} s "
                         f"(log {log})")

    def generate(self, requests: list[Request]) -> list[Response]:
        with self._lock:
            try:
                self.conn.send(("generate", [r.to_dict() for r in requests]))
                while True:
                    msg = self.conn.recv()
                    if msg[0] == "progress":
                        if self.on_progress is not None:
                            self.on_progress(msg[1])
                        continue
                    break
            except (EOFError, OSError) as e:
                raise ModelError(f"{self.spec.name}: the node's model server (pid {self.info['pid']}) went away "
                                 f"during a call ({type(e).__name__}); its log: {self.path.with_suffix('.log')}") from e
        if msg[0] == "error":
            raise ModelError(f"{self.spec.name} (node's model server, pid {self.info['pid']}): {msg[1]}")
        _, answers, stats = msg
        if hasattr(self, "prefill_tokens"):
            self.prefill_tokens += stats["prefill_tokens"]
            self.prefill_seconds += stats["prefill_seconds"]
        return [Response.from_dict(a, cached=False) for a in answers]

    def close(self) -> None:
        """The job's connection ends; the server stays for the next job."""
        with contextlib.suppress(Exception):
            self.conn.close()


# ---- a SLURM allocation's launcher ----------------------------------------------------------


class Launcher:
    """Starts model servers for the steps of one SLURM allocation (the allocation's Snakemake
    holds it; profiles/slurm groups a model's jobs into one allocation). A server a step started
    itself would be one of the step's processes and end with it; started here, it belongs to the
    allocation's batch step, so the next step (the group's next job) finds it loaded. The servers
    end when this process stops them (``close``, at the Snakemake's exit), when idle, or with
    the allocation."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._listener = None

    def start(self) -> "Launcher":
        from multiprocessing.connection import Listener

        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._listener = Listener(str(self.path), family="AF_UNIX", authkey=_launcher_key())
        threading.Thread(target=self._accept, name="model-server-launcher", daemon=True).start()
        return self

    def _accept(self) -> None:
        _accept_loop(self._listener, self._handle, "model-server-launch")

    def _handle(self, conn) -> None:
        """One job's request: ``("start", argv, env, log)``, answered with the pid; then
        ``("poll",)`` answered with the exit status (None while it runs), ``("stop",)``."""
        proc = None
        try:
            while True:
                msg = conn.recv()
                if msg[0] == "start":
                    _, argv, env, log = msg
                    if argv[1:3] != ["-m", "convrag.llm.node"]:  # starts model servers, nothing else
                        conn.send(("error", "the launcher starts convrag.llm.node servers only"))
                        continue
                    # the allocation's Snakemake owns the server (convrag.lifeline): it ends with it
                    env = {**env, lifeline.ENV: lifeline.token(os.getpid()) or ""}
                    with open(log, "ab") as out:
                        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=subprocess.STDOUT, close_fds=True)
                    with self._lock:
                        self.procs.append(proc)
                    conn.send(("pid", proc.pid))
                elif msg[0] == "poll":
                    conn.send(("rc", None if proc is None else proc.poll()))
                elif msg[0] == "stop":
                    if proc is not None:
                        proc.terminate()
                    conn.send(("rc", None))
        except (EOFError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self, wait_s: float = 30.0) -> None:
        """Stop listening and stop every server started here (SIGTERM: they close cleanly)."""
        self._listener = _stop_listening(self._listener, self.path)
        with self._lock:
            procs = list(self.procs)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + wait_s
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()


def _accept_loop(listener, handle, name: str, stopping: threading.Event | None = None) -> None:
    """Each connection ``listener`` accepts is handled on a thread of its own until the listener
    is closed (or ``stopping`` is set); a client with the wrong key is turned away."""
    from multiprocessing import AuthenticationError

    while stopping is None or not stopping.is_set():
        try:
            conn = listener.accept()
        except AuthenticationError:
            continue
        except OSError:  # the listener was closed
            return
        threading.Thread(target=handle, args=(conn,), name=name, daemon=True).start()


def _stop_listening(listener, path: Path) -> None:
    """Close ``listener`` (if any) and remove its socket file; returns None for the attribute."""
    if listener is not None:
        with contextlib.suppress(Exception):
            listener.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return None


def _launcher_key() -> bytes:
    # as _authkey: the folder's mode keeps other users out; this keeps other programs out
    return f"convrag-launcher-{os.getuid()}".encode()


def allocation_launcher() -> Launcher:
    """The launcher of this SLURM allocation, started and named in the environment
    ($CONVRAG_MODEL_LAUNCHER) for the steps this process runs; stopped at this process's exit."""
    import atexit

    jobid = os.environ.get("SLURM_JOB_ID", "")
    if not jobid:
        raise ConfigError("a model-server launcher belongs to a SLURM allocation ($SLURM_JOB_ID is not set)")
    launcher = Launcher(server_dir() / f"launcher-{jobid}-{os.getpid()}.sock").start()
    os.environ[LAUNCHER_ENV] = str(launcher.path)
    atexit.register(launcher.close)
    return launcher


class _Launched:
    """A server started through the allocation's launcher: ``poll`` and ``terminate`` as a Popen."""

    def __init__(self, conn, pid: int):
        self.conn, self.pid = conn, pid

    def poll(self):
        try:
            self.conn.send(("poll",))
            return self.conn.recv()[1]
        except (EOFError, OSError) as e:
            raise ModelError(f"the allocation's model-server launcher went away while the server (pid {self.pid}) "
                             f"was starting ({type(e).__name__}): did the allocation's Snakemake end?") from e

    def terminate(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(("stop",))
            self.conn.recv()


def launch(argv: list[str], log: Path) -> _Launched:
    """Ask the allocation's launcher ($CONVRAG_MODEL_LAUNCHER) to start ``argv`` with this job's
    environment (its GPUs, threads and paths)."""
    from multiprocessing.connection import Client

    path = os.environ[LAUNCHER_ENV]
    try:
        conn = Client(path, family="AF_UNIX", authkey=_launcher_key())
    except (FileNotFoundError, ConnectionRefusedError) as e:
        raise ModelError(f"the allocation's model-server launcher {path} (${LAUNCHER_ENV}) does not answer "
                         f"({type(e).__name__}): was this job started by the allocation's Snakemake?") from e
    conn.send(("start", argv, dict(os.environ), str(log)))
    kind, value = conn.recv()
    if kind != "pid":
        raise ModelError(f"the allocation's model-server launcher refused to start the server: {value}")
    return _Launched(conn, value)


# ---- the server -----------------------------------------------------------------------------


class NodeServer:
    """Loads ``spec``'s backend once, then answers every job that connects until it has been
    idle for ``idle_s`` seconds or is told to stop."""

    def __init__(self, spec: ModelSpec, path: str | Path, key: str, idle_s: float, make=None):
        """``make(spec)`` builds the backend (default: convrag.llm.backends.make_backend)."""
        self.spec, self.path, self.key, self.idle_s = spec, Path(path), key, idle_s
        self._make = make
        self.backend = None
        self.load_seconds = 0.0
        self.jobs = 0  # connections accepted
        self.active = 0
        self.calls = 0
        self.last = time.monotonic()
        self.stopping = threading.Event()
        self._call = threading.Lock()  # one backend call at a time
        self._count = threading.Lock()
        self._listener = None

    def _handle(self, conn) -> None:
        with self._count:
            self.jobs += 1
            self.active += 1
            job = self.jobs
        try:
            conn.send({"pid": os.getpid(), "model": self.spec.name, "load_seconds": self.load_seconds, "jobs": job,
                       "has_prefill": hasattr(self.backend, "prefill_tokens")})
            while not self.stopping.is_set():
                try:
                    op, payload = conn.recv()
                except (EOFError, OSError):
                    break
                if op != "generate":
                    conn.send(("error", f"unknown operation {op!r}"))
                    continue
                try:
                    reqs = [Request(**d) for d in payload]
                    with self._call:
                        b = self.backend
                        p0, s0 = getattr(b, "prefill_tokens", 0), getattr(b, "prefill_seconds", 0.0)
                        if hasattr(b, "on_progress"):
                            b.on_progress = lambda n: conn.send(("progress", n))
                        try:
                            out = b.generate(reqs)
                        finally:
                            if hasattr(b, "on_progress"):
                                b.on_progress = None
                        stats = {"prefill_tokens": getattr(b, "prefill_tokens", 0) - p0,
                                 "prefill_seconds": getattr(b, "prefill_seconds", 0.0) - s0}
                        self.calls += 1
                    conn.send(("ok", [r.to_dict() for r in out], stats))
                except (EOFError, OSError):
                    break
                except Exception as e:  # the job gets the failure; the server stays for the next one
                    traceback.print_exc()
                    with contextlib.suppress(Exception):
                        conn.send(("error", f"{type(e).__name__}: {e}"))
        finally:
            with contextlib.suppress(Exception):
                conn.close()
            with self._count:
                self.active -= 1
                self.last = time.monotonic()

    def _accept(self) -> None:
        _accept_loop(self._listener, self._handle, "model-server-job", self.stopping)

    def close(self) -> None:
        """Stop listening (the socket file goes) and release the model."""
        self.stopping.set()
        self._listener = _stop_listening(self._listener, self.path)
        if self.backend is not None and hasattr(self.backend, "close"):
            with contextlib.suppress(Exception):
                self.backend.close()
        self.backend = None

    def serve(self) -> None:
        from multiprocessing.connection import Listener

        from convrag.llm.backends import make_backend as make_local_backend

        t0 = time.perf_counter()
        self.backend = (self._make or make_local_backend)(self.spec)
        self.load_seconds = time.perf_counter() - t0
        log(f"loaded {self.spec.name} ({self.spec.backend}) in {self.load_seconds:.1f} s")
        # listening only once loaded: a socket that exists answers at once
        self._listener = Listener(str(self.path), family="AF_UNIX", authkey=_authkey(self.key))
        threading.Thread(target=self._accept, name="model-server-accept", daemon=True).start()
        self.last = time.monotonic()
        log(f"listening at {self.path}; stops after {self.idle_s:g} s without a job")
        while not self.stopping.wait(0.2):
            with self._count:
                idle = self.active == 0 and time.monotonic() - self.last >= self.idle_s
            if idle:
                log(f"idle for {self.idle_s:g} s after {self.jobs} jobs and {self.calls} calls: stopping")
                break
        self.close()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] model server {os.getpid()}: {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m convrag.llm.node --spec FILE --socket PATH --key KEY --idle-s S``: started by
    the first job that needs the model (NodeBackend); not meant to be run by hand."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m convrag.llm.node", description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True, help="the model's registry entry as JSON (a file)")
    p.add_argument("--socket", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    a = p.parse_args(argv)
    spec = ModelSpec(**{k: v for k, v in json.loads(Path(a.spec).read_text(encoding="utf-8")).items()
                        if k in {f.name for f in dataclasses.fields(ModelSpec)}})
    server = NodeServer(spec, a.socket, a.key, a.idle_s)

    def stop(signum, _frame):
        log(f"signal {signum}: stopping")
        server.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # a local run's server ends with the Snakemake run that started its first job
    lifeline.watch("the model server", cleanup=server.close)
    try:
        server.serve()
    finally:
        server.close()
    log("stopped")
    # everything is closed: end here, not in the interpreter's teardown, where the native threads
    # of torch (or vLLM) can abort the process while the lifeline's watcher ends it too
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
