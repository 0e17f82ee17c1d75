"""Every command, target, rule and config file the README names exists (issue 39, item 6).

The README's code spans and blocks are read as a user would copy them:
- every ``convrag <command> [<subcommand>]`` is a command of ``convrag.cli``'s parser (its nested
  subcommands too: ``convrag coral pages | flows | contextualise``);
- every ``snakemake ...`` line names rules and targets the workflow has: a bare target is a rule
  of the Snakefile or its rule files, a path target ``results/<study>/tables|figures/<name>.<ext>``
  a target of that study, ``--until`` a rule, ``--configfile`` a file;
- every ``results/<study>/tables|figures/<name>``, and in a study's own section every
  ``tables/<name>`` / ``figures/<name>``, is a target of that study, of that kind;
- every study's target table (``| target under `results/<study>/` | what |``) lists every target
  of the study (its ``reproduction`` target is described once for every study, under "How to
  read a reproduction table");
- every ``config/...`` path exists, and every other repository path (``docs/...``,
  ``tests/...``, the package's ``convrag/...`` and ``studies/...``).
"""

from __future__ import annotations

import argparse
import re
import shlex
from functools import lru_cache

import pytest

from convrag.config import REPO_ROOT

README = REPO_ROOT / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")


# ---- reading the README ---------------------------------------------------------------------------


def code_texts(md: str) -> list[str]:
    """The fenced blocks, then the inline code spans of the rest."""
    blocks = FENCE.findall(md)
    return blocks + SPAN.findall(FENCE.sub("", md))


def sections(md: str) -> list[tuple[str, str]]:
    """(heading, text) of every ``## `` section (its ``###`` subsections included)."""
    parts = re.split(r"^## ", md, flags=re.M)
    return [(p.split("\n", 1)[0], p) for p in parts[1:]]


def section_study(heading: str, studies) -> str | None:
    """The study a ``##`` section is about: the first study key its heading names."""
    found = [(m.start(), k) for k in studies for m in [re.search(rf"\b{k}\b", heading)] if m]
    return min(found)[1] if found else None


def target_table(text: str, study: str) -> list[tuple[str, str]]:
    """(kind, name) of every target in the section's ``target under `results/<study>/``` table;
    a bare name in a cell takes the kind of the one before it (``figures/a``, ``b``)."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"| target under `results/{study}/`"))
    except StopIteration:
        return []
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        kind = None
        for span in SPAN.findall(line.split("|")[1]):
            m = re.fullmatch(r"(tables|figures)/([a-z0-9_]+)", span)
            if m:
                kind = m.group(1)
                out.append((kind, m.group(2)))
            elif kind and re.fullmatch(r"[a-z0-9_]+", span):
                out.append((kind, span))
    return out


# ---- what exists ------------------------------------------------------------------------------------


@lru_cache
def studies() -> dict:
    from convrag.studies import all_studies

    return all_studies()


def targets(study: str) -> dict[str, str]:
    """name -> 'tables' | 'figures' of every target of the study."""
    return {n: t.kind + "s" for n, t in studies()[study].all_targets().items()}


@lru_cache
def cli() -> argparse.ArgumentParser:
    from convrag.cli import build_parser

    return build_parser()


def subcommands(parser) -> dict:
    """A parser's subcommands: name -> its parser."""
    return {name: sub for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, sub in a.choices.items()}


def options(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


@lru_cache
def rules() -> set[str]:
    """Every rule name of the Snakefile and its rule files (``rule x:``, ``use rule ... as x``)."""
    out = set()
    for f in [REPO_ROOT / "Snakefile", *sorted((REPO_ROOT / "workflow" / "rules").rglob("*.smk"))]:
        text = f.read_text(encoding="utf-8")
        out |= set(re.findall(r"^\s*rule (\w+):", text, re.M))
        out |= set(re.findall(r"^\s*use rule \S+(?: from \w+)? as (\w+)", text, re.M))
    return out


# ---- the checks (each returns what the README names that does not exist) -------------------------------


SHELL = {"&&", "||", ";", "|", ">", "2>", ">>"}


def unknown_commands(texts) -> tuple[list[str], int]:
    """``convrag`` calls whose command, subcommand or option the CLI lacks, and how many words
    were checked (a command's options are read up to the end of its shell command)."""
    bad, checked = [], 0
    for text in texts:
        for line in text.splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("#"):
                continue
            for m in re.finditer(r"(?:^|[\s(])convrag\s+(.+)", line):
                words, parser, i = m.group(1).split(), cli(), 0
                while i < len(words) and subcommands(parser):
                    w, subs = words[i], subcommands(parser)
                    if w.startswith("-") or not re.fullmatch(r"[a-z][a-z0-9-]*", w):
                        break  # an option of the group (--help), or a placeholder (<study>)
                    checked += 1
                    if w not in subs:
                        bad.append(f"convrag {' '.join(words[:i + 1])}")
                        break
                    alternatives = False
                    while i + 2 < len(words) and words[i + 1] == "|":  # alternatives: pages | flows
                        checked, alternatives = checked + 1, True
                        if words[i + 2] not in subs:
                            bad.append(f"convrag ... {words[i + 2]} (in: {line})")
                        i += 2
                    parser, i = (None if alternatives else subs[w]), i + 1
                    if parser is None:
                        break
                if parser is None or subcommands(parser) or (i < len(words) and "<" in words[i]):
                    continue  # alternatives, a command group, a placeholder: no options to read
                for w in words[i:]:
                    if w in SHELL:
                        break
                    if w.startswith("-"):
                        checked += 1
                        if w.split("=", 1)[0] not in options(parser):
                            bad.append(f"convrag {parser.prog.split(' ', 1)[1]} {w}")
    return bad, checked


VALUE_OPTIONS = {"--cores", "-c", "--jobs", "-j", "--report", "--directory", "-d", "--snakefile", "-s",
                 "--profile", "--workflow-profile"}


def snakemake_problems(texts) -> tuple[list[str], int]:
    """Rules, targets and files of ``snakemake`` lines that do not exist, and how many were checked."""
    bad, checked = [], 0
    for text in texts:
        for line in text.splitlines():
            if "snakemake " not in line or line.lstrip().startswith("#"):
                continue
            words = shlex.split(line.split(" # ")[0][line.index("snakemake "):])[1:]
            i = 0
            while i < len(words):
                w = words[i]
                if w in VALUE_OPTIONS:
                    if w in ("--workflow-profile", "--profile"):
                        checked += 1
                        bad += [] if (REPO_ROOT / words[i + 1]).exists() else [f"{w} {words[i + 1]}"]
                    i += 2
                    continue
                if w in ("--configfile", "--config", "--until"):
                    i += 1
                    while i < len(words) and not words[i].startswith("-"):
                        v = words[i]
                        if w == "--configfile":
                            if not v.endswith((".yaml", ".yml")):
                                break
                            checked += 1
                            bad += [] if "<" in v or (REPO_ROOT / v).is_file() else [f"--configfile {v}"]
                        elif w == "--config":
                            if "=" not in v:
                                break
                        else:
                            checked += 1
                            bad += [] if v in rules() else [f"--until {v}"]
                        i += 1
                    continue
                if not w.startswith("-") and "<" not in w:
                    checked += 1
                    m = re.fullmatch(r"results/([a-z_]+)/(tables|figures)/([a-z0-9_]+)\.\w+", w)
                    if m:
                        if targets(m.group(1)).get(m.group(3)) != m.group(2):
                            bad.append(f"target {w}")
                    elif "/" in w or w not in rules():
                        bad.append(f"target {w} (in: {line.strip()})")
                i += 1
    return bad, checked


def unknown_result_targets(md: str) -> tuple[list[str], int]:
    """``results/<study>/tables|figures/<name>`` anywhere in code, and ``tables|figures/<name>``
    in a study's own section, that are not targets of that study (of that kind)."""
    bad, checked = [], 0
    for text in code_texts(md):
        for study, kind, name in re.findall(r"results/([a-z_]+)/(tables|figures)/([a-z0-9_]+)", text):
            if study in studies():
                checked += 1
                bad += [] if targets(study).get(name) == kind else [f"results/{study}/{kind}/{name}"]
    for heading, text in sections(md):
        study = section_study(heading, studies())
        if study is None:
            continue
        rows = target_table(text, study)
        for span in SPAN.findall(FENCE.sub("", text)):
            m = re.fullmatch(r"(tables|figures)/([a-z0-9_]+)(?:\.\w+)?", span)
            if m:
                rows.append((m.group(1), m.group(2)))
        for kind, name in dict.fromkeys(rows):  # a table row is a code span too: once each
            checked += 1
            bad += [] if targets(study).get(name) == kind else [f"{study}: {kind}/{name}"]
    return bad, checked


def missing_from_tables(md: str) -> tuple[list[str], int]:
    """Targets of a study that its README target table leaves out, and how many tables were read."""
    bad, tables = [], 0
    for heading, text in sections(md):
        study = section_study(heading, studies())
        listed = {name for _, name in target_table(text, study)} if study else set()
        if not listed:
            continue
        tables += 1
        bad += [f"{study}: {n}" for n in targets(study) if n not in listed and n != "reproduction"]
    return bad, tables


def unknown_rules(md: str) -> tuple[list[str], int]:
    """Rules the text names (``rule `x```) that the workflow does not define."""
    named = set(re.findall(r"\brules?\s+`(\w+)`", md))
    return sorted(named - rules()), len(named)


TOP = r"(?:\.ci|benchmarks|config|docs|envs|profiles|resources|tests|workflow)/"
PACKAGE = {"convrag/": "workflow/convrag/", "studies/": "workflow/convrag/studies/"}


def missing_paths(md: str) -> tuple[list[str], int]:
    """Repository paths the README's code names that do not exist: ``config/...``, ``docs/...``
    and the other top folders, and the package's own ``convrag/...`` and ``studies/...``
    (placeholders such as ``<study>`` are not read; a ``*`` must match something)."""
    found = set()
    for t in code_texts(md):
        found |= {p.rstrip(".,:;)") for p in re.findall(rf"(?<![\w/.~$-])(?:{TOP}|convrag/|studies/)[\w./*<>-]*", t)}
    paths = sorted(p for p in found if "<" not in p and p.rstrip("/") not in ("convrag", "studies"))
    bad = []
    for p in paths:
        real = next((v + p[len(k):] for k, v in PACKAGE.items() if p.startswith(k)), p)
        if not (list(REPO_ROOT.glob(real)) if "*" in real else (REPO_ROOT / real).exists()):
            bad.append(p)
    return bad, len(paths)


# ---- the README ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def md() -> str:
    return README.read_text(encoding="utf-8")


def test_every_convrag_command_exists(md):
    bad, checked = unknown_commands(code_texts(md))
    assert checked > 20 and not bad, bad


def test_every_snakemake_rule_target_and_config_exists(md):
    bad, checked = snakemake_problems(code_texts(md))
    assert checked > 15 and not bad, bad


def test_every_named_target_exists(md):
    bad, checked = unknown_result_targets(md)
    assert checked > 60 and not bad, bad


def test_every_target_is_in_its_studys_table(md):
    bad, tables = missing_from_tables(md)
    assert tables == 4 and not bad, bad  # lic_rag, mtrag_un, coral, cross have a target table
    assert "Every study has a `reproduction` target" in md  # the one target no table repeats


def test_every_named_rule_exists(md):
    bad, checked = unknown_rules(md)
    assert checked > 3 and not bad, bad


def test_every_repository_path_exists(md):
    bad, checked = missing_paths(md)
    assert checked > 60 and not bad, bad
    assert sum(p.startswith("config/") for p in re.findall(r"`(config/[^`\s]+)`", md)) > 10  # configs among them


# ---- the checks catch what they are for ------------------------------------------------------------------


def test_the_checks_catch_a_wrong_name():
    assert unknown_commands(["convrag estimate --config x --measured=y", "convrag coral pages | flows | contextualize",
                             "convrag cache exports --out b", "convrag frobnicate",
                             "convrag status --watch 10 | tee x --no-such", "convrag list --jsn"])[0] == [
        "convrag ... contextualize (in: convrag coral pages | flows | contextualize)", "convrag cache exports",
        "convrag frobnicate", "convrag list --jsn"]
    assert snakemake_problems(["snakemake --cores all results/lic_rag/tables/recovery.csv lic_rag",
                               "snakemake --cores all results/lic_rag/tables/recovery_bars.png",
                               "snakemake --cores 1 --until download_files --configfile config/studies/nope.yaml",
                               "snakemake --cores all lic-rag"])[0] == [
        "target results/lic_rag/tables/recovery_bars.png", "--until download_files",
        "--configfile config/studies/nope.yaml", "target lic-rag (in: snakemake --cores all lic-rag)"]
    md = ("## lic_rag: x\n\n| target under `results/lic_rag/` | what |\n|---|---|\n"
          "| `tables/recovery`, `figures/recovery_bars` | x |\n| `figures/recovery_pooled` | y |\n\n"
          "See `tables/no_such_table` and `results/coral/figures/table1_statistics`.\n")
    assert unknown_result_targets(md)[0] == ["results/coral/figures/table1_statistics", "lic_rag: figures/recovery_pooled",
                                             "lic_rag: tables/no_such_table"]
    missing, _ = missing_from_tables(md)
    assert "lic_rag: recall_summary" in missing and "lic_rag: recovery" not in missing
    assert unknown_rules("rule `build_index` and rule\n`coral_rewrite`")[0] == ["coral_rewrite"]
    assert missing_paths("`config/studies/nope.yaml`, `config/studies/*.yaml`, `studies/coral/nope.py`, "
                         "`convrag/cost.py`, `docs/<name>.md`")[0] == ["config/studies/nope.yaml",
                                                                     "studies/coral/nope.py"]
