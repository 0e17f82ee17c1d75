"""`convrag miniature`'s command line (issue 44): Snakemake arguments after `--` reach the run
wherever the options stand, and `--workflow-profile` picks the profile (the SLURM lane runs a
miniature through profiles/slurm that way). The run itself is replaced here: only the arguments
are checked."""

import pytest

from convrag import cli, miniature


@pytest.fixture
def calls(monkeypatch):
    got = []
    monkeypatch.setattr(miniature, "run", lambda study, cores, directory, extra: got.append(
        (study, cores, directory, extra)) or 0)
    return got


@pytest.mark.parametrize("argv, expected", [
    (["coral"], ("coral", 2, None, [])),
    (["coral", "--", "-n"], ("coral", 2, None, ["-n"])),
    # an option between the study and `--`: argparse leaves the list to main(), which gives it back
    (["coral", "--cores", "4", "--", "-n", "--forceall"], ("coral", 4, None, ["-n", "--forceall"])),
    (["--cores", "3", "lic_rag", "--directory", "/tmp/w", "--", "--cores", "1"],
     ("lic_rag", 3, "/tmp/w", ["--cores", "1"])),
    (["worse_labels", "--workflow-profile", "/tmp/prof", "--cores", "2", "--", "-n"],
     ("worse_labels", 2, None, ["--workflow-profile", "/tmp/prof", "-n"])),
])
def test_snakemake_arguments_and_the_profile_reach_the_run(calls, argv, expected):
    assert cli.main(["miniature", *argv]) == 0
    assert calls == [expected]


def test_an_unknown_option_is_still_refused(calls, capsys):
    for argv in (["miniature", "coral", "--bogus"], ["miniature", "coral", "--cores", "2", "--bogus", "--", "-n"],
                 ["list", "--bogus"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
        assert "unrecognized arguments: " in capsys.readouterr().err
    assert calls == []
