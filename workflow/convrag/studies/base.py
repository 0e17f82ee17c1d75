"""The study contract: everything the shared workflow needs to know about a study.

A study is a package (``convrag/studies/<key>/``, or a plug-in folder named in the config's
``study_plugins``) whose ``__init__.py`` defines ``STUDY``, an instance of a ``Study``
subclass. From it the shared code validates the study's config block (its schema fragment
plus ``check``), wires its rule file into the Snakefile, builds its tables and figures
(``targets`` and ``artifacts``) with one generic rule, gathers its accounting, sizes it
(``estimate``) and adds its CLI subcommands (``convrag <key> ...``). Nothing outside the
study's own files knows its name. ``docs/adding_a_study.md`` lists the files a study adds.

Heavy imports (pandas, models) belong inside methods and target functions: every CLI call
and every Snakemake start imports all study packages.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from convrag.resources import REPO_ROOT  # noqa: E402

# Target (one table or figure of a study) is defined with the machinery that builds it
from convrag.report.targets import Inputs, Target  # noqa: E402,F401


class Study:
    """Base class of every study; a study overrides what it has.

    Conventional files of a built-in study ``<key>``: schema fragment
    ``workflow/schemas/studies/<key>.schema.yaml``, rule file ``workflow/rules/studies/<key>.smk``,
    captions ``workflow/report/<key>/<target>.rst``, prompts ``resources/prompts/<key>/``.
    A plug-in keeps them in its own folder (``home``): ``schema.yaml``, ``rules.smk``,
    ``report/``.
    """

    key: str = ""
    title: str = ""
    # Bump when a prompt or the protocol changes in a way that makes old results incomparable;
    # written into the study's outputs (accounting) so a table says which protocol made it.
    version: str = "1"
    home: Path | None = None  # a plug-in's folder; None for a built-in study

    # ---- files --------------------------------------------------------------------------
    @property
    def schema_path(self) -> Path:
        if self.home is not None:
            return self.home / "schema.yaml"
        return REPO_ROOT / "workflow" / "schemas" / "studies" / f"{self.key}.schema.yaml"

    @property
    def rules_path(self) -> Path | None:
        path = (self.home / "rules.smk") if self.home is not None else (
            REPO_ROOT / "workflow" / "rules" / "studies" / f"{self.key}.smk")
        return path if path.exists() else None

    @property
    def captions_dir(self) -> Path:
        if self.home is not None:
            return self.home / "report"
        return REPO_ROOT / "workflow" / "report" / self.key

    @property
    def cli_name(self) -> str:
        return self.key.replace("_", "-")

    # ---- config -------------------------------------------------------------------------
    def check(self, config: dict, registry: dict, source: str) -> None:
        """Cross-reference checks of the (validated) study block against the rest of the
        config and the model registry; raise ConfigError naming the key."""

    # ---- the study's own modules ----------------------------------------------------------
    # Hooks a study answers from its own package's modules by their conventional names (module,
    # name), so its __init__.py does not forward each one: ``targets.TARGETS``,
    # ``plan.model_jobs``, ``estimate.estimate``, ``rehearsal.rehearsal_inputs`` and
    # ``calibrated_rehearsal_inputs``, ``cli.add_cli``. A study without the module (or the name)
    # keeps the empty default; a study that overrides the method answers it itself.
    HOOKS = {"targets": ("targets", "TARGETS"), "plan": ("plan", "model_jobs"),
             "estimate": ("estimate", "estimate"), "rehearsal_inputs": ("rehearsal", "rehearsal_inputs"),
             "calibrated_rehearsal_inputs": ("rehearsal", "calibrated_rehearsal_inputs"),
             "add_cli": ("cli", "add_cli")}

    def own(self, hook: str):
        """The study's own answer to ``hook`` (``HOOKS``): the named object of its module, or None."""
        package = type(self).__module__
        module, name = self.HOOKS[hook]
        try:
            found = importlib.util.find_spec(f"{package}.{module}") is not None
        except ModuleNotFoundError:  # a study class defined in a plain module, not a package
            found = False
        return getattr(importlib.import_module(f"{package}.{module}"), name, None) if found else None

    # ---- what it builds -------------------------------------------------------------------
    def targets(self) -> dict[str, Target]:
        """Named tables and figures: ``results/<key>/tables|figures/<name>``."""
        return self.own("targets") or {}

    def artifacts(self, config: dict, layout) -> dict[str, Any]:
        """Artifact name -> path (or list of paths) that targets read (``Target.inputs``); None
        for an artifact this config does not make (its targets are then not built)."""
        return {}

    def context(self, config: dict) -> dict:
        """JSON-able settings every target build receives (bootstrap, analysis options)."""
        return {}

    def run_settings(self, config: dict) -> dict:
        """What a reader needs to read this run's numbers (top-k, passages shown, models, data
        source), label -> value; every caption of the study ends with them
        (``convrag.report.runnote``). Default: the run identity of ``context``'s
        ``reproduction``, and the bootstrap of its intervals (``context``'s ``boot``: resamples,
        seed, resampling unit) so that no caption states fixed settings; a study adds its top-k
        and the like."""
        ctx = self.context(config)
        out = dict(ctx.get("reproduction") or {})
        boot = ctx.get("boot")
        if isinstance(boot, dict) and "n_resamples" in boot:
            out["bootstrap (95% percentile intervals)"] = bootstrap_words(boot)
        return out

    def run_note(self, name: str, config: dict) -> str:
        """The sentence on this run's settings that target ``name``'s caption ends with; the
        same for every target of the study (the rules compute it once per study)."""
        from convrag.report.runnote import run_note

        return run_note(self.run_settings(config), config)

    def tiny_models(self, config: dict) -> dict[str, float]:
        """The run's models under 1B parameters (name -> billions): every figure of the study
        whose numbers come from a model says so on the figure (a band under its panels), as its
        caption's Substitutions sentence does (``convrag.report.runnote``)."""
        from convrag.report.runnote import run_tiny_models

        return run_tiny_models(self.run_settings(config), config)

    def outputs(self, config: dict, layout) -> list[str]:
        """Final outputs besides tables and figures (e.g. conversation files: deleting one
        makes Snakemake redo its job)."""
        return []

    def accounting_files(self, config: dict, layout) -> list[str]:
        """The per-job LLM accounting JSON files gathered into ``tables/accounting``."""
        return []

    def hub_models(self, config: dict) -> list[tuple[str, str]]:
        """(config key, Hugging Face repository) of the models the study's own metrics load by
        themselves, with no model named in the config (``convrag sources`` lists and pins them)."""
        return []

    def rehearsal_inputs(self, config: dict, folder, questions: int = 4, runs: int = 2,
                         seed: int = 0) -> dict | None:
        """Synthetic inputs of the study's targets at the grid's full shape (artifact name ->
        path), written into ``folder`` with seeded values and no model, for
        ``convrag reproduction plan`` (convrag.report.rehearsal); None: no rehearsal yet."""
        own = self.own("rehearsal_inputs")
        return own(config, Path(folder), questions, runs, seed) if own else None

    @property
    def has_rehearsal(self) -> bool:
        return type(self).rehearsal_inputs is not Study.rehearsal_inputs or self.own("rehearsal_inputs") is not None

    def calibrated_rehearsal_inputs(self, config: dict, folder, targets: dict[str, float], questions: int = 4,
                                    runs: int = 2, seed: int = 0) -> tuple[dict, dict[str, str]] | None:
        """Like ``rehearsal_inputs``, with per-unit scores drawn so that each published entry
        named in ``targets`` (entry id -> the value our table should give, on the published
        scale) comes out at that value; returns the inputs and, for each entry of ``targets``
        it cannot drive, why (a ratio of means, a rank, a count the grid's shape fixes).
        None: the study has no calibrated rehearsal yet (convrag.report.rehearsal)."""
        own = self.own("calibrated_rehearsal_inputs")
        return own(config, Path(folder), targets, questions, runs, seed) if own else None

    # ---- planning and sizing --------------------------------------------------------------
    def plan(self, config: dict) -> list[dict]:
        """Every model-calling job of the study's grid (one dict per job), for sizing and
        tests; the rule file plans the same jobs from the same functions."""
        own = self.own("plan")
        return own(config) if own else []

    def estimate(self, config: dict, measured: dict, throughput) -> list:
        """Sizing of the study's grid for ``config`` from a measured run: a list of
        ``convrag.cost.Work`` (a ``cost.WorkList`` may add notes and facts for the report).
        ``measured``: ``results`` (folder), ``config`` (that run's), ``passage_tokens``."""
        own = self.own("estimate")
        return own(config, measured, throughput) if own else []

    # ---- command line ---------------------------------------------------------------------
    def add_cli(self, sub) -> None:
        """Add the study's own stages to ``convrag <cli_name>`` (an argparse subparsers)."""
        own = self.own("add_cli")
        if own:
            own(sub)

    # ---- helpers ----------------------------------------------------------------------------
    def all_targets(self) -> dict[str, Target]:
        """The study's targets plus the shared accounting table when it has accounting."""
        from convrag.report.targets import accounting_target

        out = dict(self.targets())
        out.setdefault("accounting", accounting_target())
        return out

    def caption(self, name: str) -> str:
        from convrag.report.targets import read_caption

        return read_caption(self, name)

    def built_targets(self, config: dict, layout) -> list[str]:
        """The targets this config builds: all but those reading an artifact it does not make
        (a target switched off by config, e.g. a paper-only analysis)."""
        absent = {k for k, v in self.artifacts(config, layout).items() if v is None}
        return [name for name, t in self.all_targets().items()
                if not (name == "accounting" and not self.accounting_files(config, layout))
                and not absent.intersection(t.inputs)]

    def final_files(self, config: dict, layout) -> list[str]:
        """Everything ``rule all`` asks of this study."""
        targets = self.all_targets()
        files = [f for name in self.built_targets(config, layout)
                 for f in layout.target_files(self.key, name, targets[name].kind)]
        return files + self.outputs(config, layout)


def bootstrap_words(boot: dict) -> str:
    """``1,000 resamples, seed 0`` (and ``, resampling dialogues`` where a unit is set): the
    bootstrap settings a caption states, from the config the run used."""
    text = f"{int(boot['n_resamples']):,} resamples, seed {boot.get('seed', 0)}"
    unit = boot.get("unit")
    return text + (f", resampling {unit}s" if unit else "")
