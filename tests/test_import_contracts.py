"""The package's floors (.importlinter): studies independent of each other, shared code that
never imports a study or the command line, no import cycle between convrag's packages. Each
contract is checked by import-linter over the real import graph; a new upward import fails here."""

import shutil
import subprocess
import sys
from pathlib import Path

from convrag.config import REPO_ROOT


def test_the_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    proc = subprocess.run([exe, "--no-cache", str(REPO_ROOT / ".importlinter")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for name in ("Studies are independent of each other", "Shared code never imports a study or the command line",
                 "No import cycles between the packages of convrag"):
        assert f"{name} KEPT" in out, out[-3000:]
    assert "Contracts: 3 kept, 0 broken." in out


def test_a_study_importing_another_breaks_a_contract():
    """The contracts can fail: a module of cross that imports lic_rag breaks the first one."""
    probe = REPO_ROOT / "workflow" / "convrag" / "studies" / "cross" / "_contract_probe.py"
    probe.write_text("from convrag.studies.lic_rag import wiring  # noqa: F401\n")
    try:
        exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
        proc = subprocess.run([exe, "--no-cache", str(REPO_ROOT / ".importlinter")], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    assert proc.returncode != 0
    assert "convrag.studies.cross is not allowed to import convrag.studies.lic_rag" in proc.stdout


def test_only_resources_knows_where_the_repository_is():
    """Shared code and studies reach the repository's files through convrag.resources.REPO_ROOT:
    no other module climbs from its own file (``Path(__file__).parents[n]``), so moving a module
    cannot silently point it at the wrong folder."""
    import re

    pkg = REPO_ROOT / "workflow" / "convrag"
    climbers = [str(p.relative_to(pkg)) for p in pkg.rglob("*.py")
                if re.search(r"__file__\)?\.resolve\(\)\.parents?\b|__file__\)\.parent", p.read_text(encoding="utf-8"))]
    assert climbers == ["resources.py"], climbers
