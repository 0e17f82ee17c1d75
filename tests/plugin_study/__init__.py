"""A throwaway plug-in study that only registers one table: the proof that adding a study
touches no shared file. Everything it needs is in this folder: the study (here), its config
schema fragment (schema.yaml) and the caption of its table (report/word_lengths.rst). It has
no rule file: its table goes through the shared report rules."""

from convrag.studies import Study, Target


def _word_lengths(inputs, ctx):
    import pandas as pd

    return pd.DataFrame({"word": ctx["words"], "letters": [len(w) for w in ctx["words"]]})


class WordLengths(Study):
    key = "word_lengths"
    title = "Word lengths (a plug-in study used by the tests)"
    version = "1"

    def check(self, config, registry, source):
        from convrag.errors import ConfigError

        if len(set(config["word_lengths"]["words"])) != len(config["word_lengths"]["words"]):
            raise ConfigError(f"{source}: invalid config key 'word_lengths.words': words repeat")

    def targets(self):
        return {"word_lengths": Target("word_lengths", "table", _word_lengths)}

    def context(self, config):
        return {"words": config["word_lengths"]["words"]}


STUDY = WordLengths()
