"""`convrag miniature <study>`: a paper config run for real, in miniature, on this machine.

Why: a paper config is otherwise proven by a dry-run, a plan and a rehearsal; the first place its
rules' shell lines, params, wildcards and downloads meet real work would be a cluster. A miniature
runs the paper config itself with an overlay (``config/miniatures/<study>.yaml``) that changes only
sizes, models and data sources, and checks that every rule of the paper config's dry-run ran.

What it starts, on the loopback address only, and stops again however the run ends:
- a download mirror (config ``download_mirror``, convrag.data.download): every download of the
  config (GitHub raw files, Hugging Face ``resolve`` URLs and ``hf_hub_download``) is fetched from
  ``<mirror>/<host>/<path>``; the overlay's ``miniature.serve`` maps each such path to a file of the
  shared samples (``../shared/data``), whole or cut (``lines`` / ``json``: a few records;
  ``recor``: the RECOR pilot sample as the release's files), so the download rule, the lock file
  and the checksum checks run on real bytes; the overlay names the served files' sha256 as the
  config's own checksums;
- the project's OpenAI-compatible endpoint (convrag.llm.serve) answering with
  ``miniature.api_model`` (the shipped SmolLM2), at ``$CONVRAG_MINIATURE_API``: the miniature's
  model registry (``miniature.registry`` entries of the backend ``openai``) points the paper's API
  roles there, so they run through the project's OpenAI client.

The last line printed is ``miniature <study>: executed E of P rules``: P the rules of
``snakemake -n --configfile config/studies/<study>.yaml``, E those of them the miniature ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from convrag.errors import ConfigError
from convrag.llm.serve import LoopbackHTTPServer

API_ENV = "CONVRAG_MINIATURE_API"        # the loopback OpenAI-compatible endpoint's base URL
API_KEY_ENV = "CONVRAG_MINIATURE_KEY"    # any value: the endpoint takes every key
HF_RESOLVE = re.compile(r"^huggingface\.co/(?:(datasets|spaces)/)?(.+?)/resolve/([^/]+)/(.+)$")


# ---- what is served ---------------------------------------------------------------------------


def _lines(data: bytes, cut: dict) -> bytes:
    """Whole lines of a text file (JSONL, TSV): those containing any of ``contains`` (all lines
    when absent), then the first ``head``; ``keep_first`` keeps a header line."""
    lines = data.decode("utf-8").splitlines(keepends=True)
    first = lines[:1] if cut.get("keep_first") else []
    rest = lines[len(first):]
    if cut.get("contains"):
        rest = [ln for ln in rest if any(s in ln for s in cut["contains"])]
    if cut.get("matching_ids_of"):
        ids = cut["_ids"]
        rest = [ln for ln in rest if any(i in ln for i in ids)]
    if "head" in cut:
        rest = rest[:cut["head"]]
    return "".join(first + rest).encode("utf-8")


def _titles(records, supporting: bool = False, distractors: int = 0) -> set[str]:
    """The passage titles of a question file's records (HippoRAG formats: MuSiQue ``paragraphs``,
    HotpotQA / 2Wiki ``context`` [[title, sentences]]); ``supporting``: only each question's
    supporting passages (MuSiQue ``is_supporting``, HotpotQA / 2Wiki ``supporting_facts`` titles,
    the ones convrag.data.hipporag requires in the corpus) and its first ``distractors`` others."""
    out = set()
    for r in records:
        named = [p["title"] for p in r.get("paragraphs") or []] + [c[0] for c in r.get("context") or []]
        if not supporting:
            out.update(named)
            continue
        gold = {p["title"] for p in r.get("paragraphs") or [] if p.get("is_supporting")}
        gold |= {f[0] for f in r.get("supporting_facts") or []}
        out |= gold
        out.update([t for t in dict.fromkeys(named) if t not in gold][:distractors])
    return out


def _json(data: bytes, cut: dict, served: dict) -> bytes:
    """A JSON array's or object's cut (``_json_cut``), written compactly (the same bytes on every run)."""
    return json.dumps(_json_cut(json.loads(data), cut, served), ensure_ascii=False).encode("utf-8")


def _json_cut(obj, cut: dict, served: dict):
    """``head`` the first records (``where``: only those whose keys have these values first: a value
    starts the key's, or a list names them);
    ``titles_of`` a corpus's passages (list of {title, ...} or dict title -> ...) whose titles the
    questions of another served file name (``supporting``: only their supporting passages and the
    first ``distractors`` others of each question);
    ``fields`` an object's fields cut each by its own cut (a file of several record lists, as MTRAG's
    human-evaluation file: its ``tasks`` and ``evaluations`` cut to the same task ids)."""
    if "where" in cut:
        obj = [r for r in obj if all(str(r.get(k, "")) in v if isinstance(v, list) else str(r.get(k, "")).startswith(v)
                                     for k, v in cut["where"].items())]
    if "titles_of" in cut:
        titles = _titles(json.loads(served_bytes(cut["titles_of"], served)), bool(cut.get("supporting")),
                         int(cut.get("distractors", 0)))
        if isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if k in titles}
        else:
            obj = [r for r in obj if r.get("title") in titles]
    if "head" in cut:
        obj = obj[:cut["head"]] if isinstance(obj, list) else dict(list(obj.items())[:cut["head"]])
    for name, sub in (cut.get("fields") or {}).items():
        if not isinstance(obj, dict) or name not in obj:
            raise ConfigError(f"miniature.serve: json cut: field {name!r} is not in the served object")
        obj = {**obj, name: _json_cut(obj[name], sub, served)}
    return obj


def _recor(folder: Path, cut: dict) -> bytes:
    """A RECOR release file (Hugging Face ``track2_recor/<domain>/``) made from the organisers'
    pilot sample (``folder``: benchmark.jsonl, documents.jsonl, qrels.txt; convrag.data.recor):
    ``file`` ``benchmark_<split>.json`` the pilot conversations named in ``conversations``, as the
    release's JSON array (objects verbatim); ``qrels_<split>.txt`` their qrels, the pilot's
    ``<conv>#turn<n> 0 <doc> 1`` as the release's tab-separated ``<conv>_turn_<n>\t0\t<doc>\t1``;
    ``documents.jsonl`` the pilot documents the qrels of those conversations name, all of them
    without ``conversations`` (other conversations' gold are then a domain's negatives);
    ``turns`` (optional) keeps each conversation's first turns and their qrels."""
    from convrag.data.recor import pilot_topic_id, topic_id

    name, convs = cut["file"], [str(c) for c in cut.get("conversations") or []]
    if name == "documents.jsonl":
        data = (folder / "documents.jsonl").read_bytes()
        if not convs:
            return data
        named = {ln.split()[2] for ln in (folder / "qrels.txt").read_text(encoding="utf-8").splitlines()
                 if len(ln.split()) == 4 and ln.split()[0].rpartition("#turn")[0] in convs}
        return b"".join(ln for ln in data.splitlines(keepends=True) if ln.strip() and json.loads(ln)["doc_id"] in named)
    chosen = {}
    for ln in (folder / "benchmark.jsonl").read_text(encoding="utf-8").splitlines():
        if ln.strip() and str(json.loads(ln)["id"]) in convs:
            chosen[str(json.loads(ln)["id"])] = conv = json.loads(ln)
            if cut.get("turns"):
                conv["turns"] = conv["turns"][:int(cut["turns"])]
    missing = [c for c in convs if c not in chosen]
    if missing or not convs:
        raise ConfigError(f"miniature.serve: recor cut: conversation(s) {missing or '(none named)'} not in "
                          f"{folder / 'benchmark.jsonl'}")
    if re.fullmatch(r"benchmark_(dev|train)\.json", name):
        return (json.dumps([chosen[c] for c in convs], ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    if re.fullmatch(r"qrels_(dev|train)\.txt", name):
        topics = {pilot_topic_id(c, t["turn_id"]): topic_id(c, t["turn_id"]) for c in convs for t in chosen[c]["turns"]}
        rows = []
        for ln in (folder / "qrels.txt").read_text(encoding="utf-8").splitlines():
            cols = ln.split()
            if len(cols) == 4 and cols[0] in topics:
                rows.append("\t".join([topics[cols[0]], *cols[1:]]) + "\n")
        return "".join(rows).encode("utf-8")
    raise ConfigError(f"miniature.serve: recor cut: file {name!r} is not one of benchmark_<split>.json, "
                      "qrels_<split>.txt, documents.jsonl")


_BYTES: dict[str, bytes] = {}


def served_bytes(key: str, served: dict, root: Path | None = None) -> bytes:
    """The bytes the mirror serves at ``key`` (a ``<host>/<path>`` of ``miniature.serve``)."""
    if key in _BYTES:
        return _BYTES[key]
    spec = served.get(key)
    if spec is None:
        raise ConfigError(f"miniature.serve: no entry {key!r}")
    path = Path(spec["path"])
    if not path.is_absolute():
        path = (root or _repo_root()) / path
    if "recor" in spec and path.is_dir():  # a folder: the RECOR pilot sample, cut to a release file
        _BYTES[key] = _recor(path, spec["recor"])
        return _BYTES[key]
    if not path.is_file():
        raise ConfigError(f"miniature.serve.{key}.path: {spec['path']} not found (the shared samples, "
                          f"../shared/data, are needed)")
    data = path.read_bytes()
    if "lines" in spec:
        cut = dict(spec["lines"])
        if "matching_ids_of" in cut:  # lines naming an id of another served JSONL file's records
            src, field = cut["matching_ids_of"]
            cut["_ids"] = [str(json.loads(ln)[field]) for ln in served_bytes(src, served, root).decode().splitlines()
                           if ln.strip()]
        data = _lines(data, cut)
    if "json" in spec:
        data = _json(data, spec["json"], served)
    if "coral_passages" in spec:  # format conversions (CORAL's conversations -> a missing file's format)
        data = _coral_passages(data)
    if "coral_as_qrecc" in spec:
        data = _coral_as_qrecc(data, spec["coral_as_qrecc"], root or _repo_root())
    if "zip" in spec:  # the bytes as the one member of a zip (a fixed time stamp: the same bytes every run)
        import io
        import zipfile

        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(zipfile.ZipInfo(spec["zip"], date_time=(2024, 1, 1, 0, 0, 0)), data)
        data = buf.getvalue()
    _BYTES[key] = data
    return data


def _repo_root() -> Path:
    from convrag.config import REPO_ROOT

    return Path(REPO_ROOT)


def _coral_passages(data: bytes) -> bytes:
    """A stand-in for CORAL's ``passage_corpus.json`` (not among the shared samples) made from a
    CORAL conversation file: one JSON Lines record ``{"ref_id": <int>, "ref_string": <text>}`` (the
    layout convrag.data.coral reads) per passage id a turn lists as golden or cites, its text the
    response text each ``[id]`` marker closes (back to the previous marker), else, for a golden
    passage no response cites, that turn's response; markers removed. Not CORAL's passages: the
    sample's own responses, so every golden and cited id exists and retrieval has text to match."""
    from convrag.data.coral import CITATION, strip_citations

    texts: dict[int, list[str]] = {}
    for conv in json.loads(data):
        for turn in conv["turns"]:
            response, start, last = turn.get("response") or "", 0, ""
            for m in CITATION.finditer(response):
                seg = " ".join(strip_citations(response[start:m.start()]).split()) or last
                last, start = seg, m.end()
                if seg and seg not in texts.setdefault(int(m.group(1)), []):
                    texts[int(m.group(1))].append(seg)
            for pid in turn.get("golden_docs_pids") or []:
                if not texts.get(int(pid)):
                    texts[int(pid)] = [" ".join(strip_citations(response).split())]
    return "".join(json.dumps({"ref_id": pid, "ref_string": " ".join(texts[pid])}, ensure_ascii=False) + "\n"
                   for pid in sorted(texts)).encode("utf-8")


def _coral_as_qrecc(data: bytes, cut: dict, root: Path) -> bytes:
    """A stand-in for QReCC's ``qrecc_<split>.json`` (no QReCC sample is shared) made from a CORAL
    conversation file and its rewrites (``rewrites``: a CORAL rewrites JSONL, relative to the
    repository): the JSON array of QReCC turn objects (convrag.data.qrecc's fields), one per turn:
    ``Context`` the earlier questions and responses, ``Question``, ``Rewrite``, ``Answer`` (the
    response without its markers), ``Answer_URL`` "", ``Conversation_no`` (1, 2, ... in file order),
    ``Turn_no``, ``Conversation_source`` "coral"."""
    from convrag.data.coral import strip_citations

    path = Path(cut["rewrites"])
    rewrites = {}
    for ln in (path if path.is_absolute() else root / path).read_text(encoding="utf-8").splitlines():
        if ln.strip():
            r = json.loads(ln)
            rewrites[r["sample_id"]] = r["rewrite"].strip()
    out = []
    for no, conv in enumerate(json.loads(data), 1):
        context: list[str] = []
        for turn in conv["turns"]:
            answer = " ".join(strip_citations(turn.get("response") or "").split())
            out.append({"Context": list(context), "Question": turn["question"],
                        "Rewrite": rewrites.get(f"{conv['conv_id']}_{turn['turn_id']}", ""), "Answer": answer,
                        "Answer_URL": "", "Conversation_no": no, "Turn_no": int(turn["turn_id"]),
                        "Conversation_source": "coral"})
            context += [turn["question"], answer]
    return json.dumps(out, ensure_ascii=False, indent=1).encode("utf-8")


def checksums(served: dict) -> dict[str, str]:
    """sha256 of every served file (what the overlay names as the config's checksums)."""
    return {k: hashlib.sha256(served_bytes(k, served)).hexdigest() for k in served}


class Mirror:
    """The download mirror: ``GET`` / ``HEAD <host>/<path>`` answers the served file, with the
    headers ``hf_hub_download`` reads for a Hugging Face ``resolve`` path (``X-Repo-Commit``,
    ``ETag``). A resolve path matches an entry at any revision (``lock`` downloads ask the default
    branch); the commit it names is the requested one when that is a commit, else one derived from
    the file's sha256 (what the lock file then records)."""

    def __init__(self, served: dict, host: str = "127.0.0.1"):
        from convrag.llm.serve import LOOPBACK

        if host not in LOOPBACK:
            raise ConfigError(f"the miniature's mirror listens on the loopback address only, not {host!r}")
        self.served, self.host, self.requests = served, host, []
        self._httpd = None

    def _find(self, path: str) -> tuple[bytes, dict] | None:
        key = path.lstrip("/").split("?", 1)[0]
        headers = {}
        m = HF_RESOLVE.match(key)
        if m:
            kind, repo, rev, name = m.groups()
            for k in self.served:
                km = HF_RESOLVE.match(k)
                if km and km.group(1) == kind and km.group(2) == repo and km.group(4) == name:
                    key = k
                    break
            if key in self.served:
                data = served_bytes(key, self.served)
                digest = hashlib.sha256(data).hexdigest()
                commit = rev if re.fullmatch(r"[0-9a-f]{40}", rev) else digest[:40]
                headers = {"X-Repo-Commit": commit, "ETag": f'"{digest}"'}
                return data, headers
        if key not in self.served:
            return None
        return served_bytes(key, self.served), headers

    def start(self) -> str:
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def _serve(self, body: bool):
                mirror.requests.append(self.path)
                try:
                    found = mirror._find(self.path)
                except ConfigError as e:
                    found, err = None, str(e)
                else:
                    err = f"not served by the miniature's mirror: {self.path}"
                if found is None:
                    msg = err.encode()
                    self.send_response(404)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    if body:
                        self.wfile.write(msg)
                    return
                data, headers = found
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/octet-stream")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self):
                self._serve(True)

            def do_HEAD(self):
                self._serve(False)

        self._httpd = LoopbackHTTPServer((self.host, 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="miniature-mirror", daemon=True).start()
        return f"http://{self.host}:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


# ---- the rules of a run ------------------------------------------------------------------------

_JOB_STATS = re.compile(r"^Job stats:\s*$")
# Snakemake's job block opens with `rule X:`; the workflow's terminal (convrag.terminal) writes one
# line per job, `[12:00:05] localrule X: job 12, wildcards`.
_RULE_LINE = re.compile(r"^\s*(?:\[\d\d:\d\d:\d\d\] )?(?:local)?(?:rule|checkpoint) ([A-Za-z_][A-Za-z0-9_]*):(?:\s*$| job )")


def planned_rules(text: str) -> dict[str, int]:
    """Rule -> job count from a Snakemake dry-run's ``Job stats`` table."""
    lines = text.splitlines()
    out: dict[str, int] = {}
    for i, ln in enumerate(lines):
        if _JOB_STATS.match(ln):
            for row in lines[i + 3:]:
                parts = row.split()
                if len(parts) != 2 or parts[0] == "total":
                    break
                out[parts[0]] = out.get(parts[0], 0) + int(parts[1])
            break
    return out


def executed_rules(text: str) -> dict[str, int]:
    """Rule -> jobs started, from a Snakemake run's output (``rule X:`` / ``localrule X:`` blocks, or
    the workflow terminal's ``[time] localrule X: job N, ...`` lines)."""
    out: dict[str, int] = {}
    for ln in text.splitlines():
        m = _RULE_LINE.match(ln)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


def _snakemake(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--snakefile", str(_repo_root() / "Snakefile"), *args]


def paper_dry_run(study: str, directory: Path) -> dict[str, int]:
    """The rules (and job counts) of the paper config's dry-run, planned in ``directory``."""
    paper = _repo_root() / "config" / "studies" / f"{study}.yaml"
    r = subprocess.run(_snakemake(["-n", "--directory", str(directory), "--configfile", str(paper)]),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ConfigError(f"the dry-run of {paper} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    rules = planned_rules(r.stdout + "\n" + r.stderr)
    if not rules:
        raise ConfigError(f"the dry-run of {paper} planned no job (no 'Job stats' table in its output)")
    return rules


def _overlay(study: str) -> tuple[Path, Path, dict]:
    import yaml

    root = _repo_root()
    paper, overlay = root / "config" / "studies" / f"{study}.yaml", root / "config" / "miniatures" / f"{study}.yaml"
    for p in (paper, overlay):
        if not p.is_file():
            known = sorted(q.stem for q in (root / "config" / "miniatures").glob("*.yaml"))
            raise ConfigError(f"no {p.relative_to(root)} (miniatures: {', '.join(known) or 'none'})")
    return paper, overlay, (yaml.safe_load(overlay.read_text()) or {}).get("miniature") or {}


def run(study: str, cores: int = 2, directory: str | Path | None = None, extra: list[str] | None = None,
        out=sys.stdout) -> int:
    """Plan the paper config, start the servers, run the miniature, stop them; 0 when E = P."""
    import tempfile

    paper, overlay, mini = _overlay(study)
    work = Path(directory or _repo_root()).resolve()
    work.mkdir(parents=True, exist_ok=True)

    def say(msg):
        print(msg, file=out, flush=True)

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="convrag-miniature-plan-") as tmp:
        planned = paper_dry_run(study, Path(tmp))
    say(f"miniature {study}: the paper config plans {sum(planned.values())} jobs of {len(planned)} rules "
        f"({time.monotonic() - t0:.0f} s)")

    served = mini.get("serve") or {}
    mirror, api, env = None, None, dict(os.environ)
    stop = threading.Event()
    proc = None

    def on_signal(signum, frame):  # stop Snakemake (it ends its jobs), then the servers in `finally`
        stop.set()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    log_text = ""
    try:
        config_args = []
        if served:
            mirror = Mirror(served)
            base = mirror.start()
            config_args.append(f"download_mirror={base}")
            say(f"miniature {study}: download mirror of {len(served)} files at {base}")
        if mini.get("api_model"):
            from convrag.llm.registry import get_spec, load_registry
            from convrag.llm.serve import ModelServer

            api = ModelServer(get_spec(load_registry(str(_repo_root() / "config" / "models.yaml")),
                                       mini["api_model"]), max_batch=int(mini.get("api_batch", 16)), wait_s=0.1)
            env[API_ENV] = api.start()
            env.setdefault(API_KEY_ENV, "miniature")
            say(f"miniature {study}: OpenAI-compatible endpoint ({mini['api_model']}) at {env[API_ENV]}")
        cmd = _snakemake(["--directory", str(work), "--cores", str(cores), "--keep-going", "--configfile", str(paper), str(overlay),
                          *(["--config", *config_args] if config_args else []), *(extra or [])])
        say("miniature " + study + ": " + " ".join(cmd[2:]))
        t1 = time.monotonic()
        lines = []
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=work)
        for ln in proc.stdout:
            lines.append(ln)
            out.write(ln)
        code = proc.wait()
        log_text = "".join(lines)
        say(f"miniature {study}: snakemake exit {code} after {time.monotonic() - t1:.0f} s"
            + (" (stopped by a signal)" if stop.is_set() else ""))
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        if api is not None:
            api.stop()
        if mirror is not None:
            mirror.stop()
        for s, h in old.items():
            signal.signal(s, h)
    done = executed_rules(log_text)
    ran = {r for r in planned if r in done}
    missing = sorted(set(planned) - ran)
    extra_rules = sorted(set(done) - set(planned))
    if missing:
        say(f"miniature {study}: not executed: {', '.join(missing)}")
    if extra_rules:
        say(f"miniature {study}: executed beyond the paper's plan: {', '.join(extra_rules)}")
    say(f"miniature {study}: {sum(done.values())} jobs in {time.monotonic() - t0:.0f} s")
    say(f"miniature {study}: executed {len(ran)} of {len(planned)} rules")
    return 0 if code == 0 and not missing else 1
