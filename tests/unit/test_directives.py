"""`#SBATCH` directives read the way sbatch reads them, the sbatch-style command line, and build_spec on top.

sbatch (src/sbatch/opt.c) reads `#SBATCH` lines from the top of the script until the first line that is neither
blank nor a comment; an unquoted `#` ends a line's options; quotes group words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import JobClass
from slurmx.core.validation import ConfigError
from slurmx.submit.directives import (
    Directives,
    parse_directives,
    sort_options,
    split_command_line,
    split_options,
)
from slurmx.submit.entry import build_spec


def site() -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
            "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"},
        },
        "classes": {"te": {"qos": "short"}, "be": {"qos": "scavenger"}},
    })


def parse(text: str) -> Directives:
    return parse_directives(text, "job.sh")


def error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------- parse_directives


def test_short_and_long_forms_with_and_without_separate_values() -> None:
    got = parse("#!/bin/bash\n#SBATCH -c4\n#SBATCH --mem 2G\n#SBATCH -J x\n#SBATCH --time=10\n#SBATCH -t 20\n")
    assert got.fields == {"cpus-per-task": "4", "mem": "2G", "job-name": "x", "time": "20"}  # later options win
    assert got.passthrough == [] and got.dropped == []


def test_several_options_on_one_line() -> None:
    got = parse("#!/bin/bash\n#SBATCH -c 2 --account=proj --exclusive -q te --exclusive=user\n")
    assert got.fields == {"cpus-per-task": "2", "qos": "te", "exclusive": ""}  # whole nodes: a spec field
    assert got.passthrough == ["--account=proj", "--exclusive=user"]  # shared with the user's own jobs: passed on


def test_stops_at_the_first_command() -> None:
    text = "#!/bin/bash\n\n# a comment\n#SBATCH --mem=1G\n   \necho hi\n#SBATCH --mem=2G\n#SBATCH --colour=red\n"
    assert parse(text).fields == {"mem": "1G"}


def test_a_later_comment_line_does_not_stop_reading() -> None:
    assert parse("#!/bin/bash\n# set up\n#SBATCH -c 3\n").fields == {"cpus-per-task": "3"}


def test_no_shebang_line() -> None:
    assert parse("#SBATCH -c 2\ntrue\n").fields == {"cpus-per-task": "2"}


@pytest.mark.parametrize(("line", "value"), [
    ('#SBATCH --job-name="my job"', "my job"),
    ("#SBATCH --job-name='my job'", "my job"),
    ('#SBATCH -J "a b"', "a b"),
    ('#SBATCH --job-name=pre"quoted part"post', "prequoted partpost"),
    ("#SBATCH --job-name=x # the name", "x"),
    ("#SBATCH --job-name=x#y", "x"),  # an unquoted '#' ends the line, as in sbatch
    ("#SBATCH --job-name='x#y'", "x#y"),
    ("#SBATCH   --job-name=x   ", "x"),
])
def test_quotes_and_trailing_comments(line: str, value: str) -> None:
    assert parse(f"#!/bin/bash\n{line}\n").fields == {"job-name": value}


def test_sorts_modelled_passthrough_and_variant_owned_options() -> None:
    got = parse("#!/bin/bash\n#SBATCH -p gpu --gres=accel:1 -o out.log -e err.log --requeue -H\n"
                "#SBATCH --signal=B:USR1@60 --comment=x --account=proj --nice=5 --mail-type=END\n")
    assert got.fields == {"partition": "gpu", "output": "out.log", "error": "err.log",  # -p: kinds (entry.py)
                          "signal": "B:USR1@60"}
    assert got.dropped == ["--gres", "--requeue", "--hold", "--comment"]
    assert got.passthrough == ["--account=proj", "--nice=5", "--mail-type=END"]


def test_unknown_long_option_names_the_line() -> None:
    assert error("#!/bin/bash\n#SBATCH -c 2\n\n#SBATCH --colour=red\n") == (
        "job.sh:4: sbatch has no option --colour; see `man sbatch`")


@pytest.mark.parametrize(("line", "expected"), [
    ("#SBATCH -Z", "job.sh:2: sbatch has no option -Z; see `man sbatch`"),
    ("#SBATCH --time", "job.sh:2: --time needs a value"),
    ("#SBATCH -t", "job.sh:2: -t needs a value"),
    ("#SBATCH --hold=1", "job.sh:2: --hold takes no value"),
    ("#SBATCH -Hx", "job.sh:2: -H takes no value"),
    ("#SBATCH account", "job.sh:2: expected an sbatch option, got 'account'"),
    ("#SBATCH --job-name='unterminated", "job.sh:2: cannot read #SBATCH line (No closing quotation)"),
])
def test_bad_directive_names_the_line(line: str, expected: str) -> None:
    assert error(f"#!/bin/bash\n{line}\ntrue\n") == expected


# ---------------------------------------------------------------------------------------------- split_options


def test_split_options_from_the_command_line() -> None:
    assert split_options(["--time=5", "-c", "4", "-c4", "--mem", "2G", "--exclusive", "--nice=3", "-H", "-J=x"],
                         "command line") == [
        ("time", "5"), ("cpus-per-task", "4"), ("cpus-per-task", "4"), ("mem", "2G"), ("exclusive", None),
        ("nice", "3"), ("hold", None), ("job-name", "x"),
    ]


def test_split_options_unknown() -> None:
    with pytest.raises(ConfigError) as info:
        split_options(["--colour"], "command line")
    assert str(info.value) == "command line: sbatch has no option --colour; see `man sbatch`"


def test_sort_options_later_wins() -> None:
    got = sort_options([("time", "5"), ("time", "10"), ("mem", "1G")])
    assert got.fields == {"time": "10", "mem": "1G"}


# ---------------------------------------------------------------------------------------------- split_command_line


@pytest.mark.parametrize(("words", "expected"), [
    (["job.sh"], ([], "job.sh", [])),
    (["job.sh", "--epochs", "5", "-c", "x"], ([], "job.sh", ["--epochs", "5", "-c", "x"])),
    (["--time=5", "job.sh", "a"], (["--time=5"], "job.sh", ["a"])),
    (["-c", "4", "job.sh"], (["-c", "4"], "job.sh", [])),  # option with a separate value
    (["-c4", "job.sh"], (["-c4"], "job.sh", [])),  # value attached
    (["--mem", "2G", "job.sh", "--mem", "9G"], (["--mem", "2G"], "job.sh", ["--mem", "9G"])),
    (["--exclusive", "-H", "job.sh"], (["--exclusive", "-H"], "job.sh", [])),  # flags take no value
    (["--nice", "job.sh"], (["--nice"], "job.sh", [])),  # optional value only with '='
    (["-J", "name", "--account", "p", "job.yaml", "x y", ""], (["-J", "name", "--account", "p"], "job.yaml",
                                                               ["x y", ""])),
    (["-", "a"], ([], "-", ["a"])),  # '-' is the script (stdin), as for sbatch
    (["--time=5"], (["--time=5"], None, [])),
    ([], ([], None, [])),
])
def test_split_command_line(words: list[str], expected: tuple[list[str], str | None, list[str]]) -> None:
    assert split_command_line(words) == expected


# ---------------------------------------------------------------------------------------------- build_spec


SCRIPT = """#!/bin/bash
#SBATCH --job-name=train -c 2
#SBATCH --mem=2G --time=1:00:00
#SBATCH --qos=short
#SBATCH -p gpu --gres=gpu:1 --account=proj
python train.py "$@"
"""


def test_build_spec_from_a_script_command_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(SCRIPT)
    spec, notes = build_spec(str(path), ["-c", "4", "--exclusive", "-o", "x.log", "--gres=gpu:2"],
                             ["--epochs", "5"], site(), ("gpu",))
    assert (spec.name, spec.cpus, spec.mem_mb, spec.time_s, spec.gpus) == ("train", 4, 2048, 3600, "2")
    assert spec.job_class is JobClass.TE
    assert spec.script == SCRIPT and spec.args == ("--epochs", "5") and spec.variants == ("gpu",)
    assert spec.sbatch == ("--account=proj",) and spec.exclusive is True
    assert notes == ["--output=x.log: each variant is a job of its own and writes its own file: x.gpu.log (gpu); "
                     "the job's output is in the file of the variant that ran"]


def test_build_spec_names_a_script_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "my job!.sh"
    path.write_text("#!/bin/bash\ntrue\n")
    spec, _ = build_spec(str(path), [], [], site())
    assert spec.name == "my_job_"


def test_build_spec_unknown_directive(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --colour=red\ntrue\n")
    with pytest.raises(ConfigError) as info:
        build_spec(str(path), [], [], site())
    assert str(info.value) == f"{path}:2: sbatch has no option --colour; see `man sbatch`"


def test_build_spec_qos_that_is_no_class(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --qos=normal\ntrue\n")
    with pytest.raises(ConfigError) as info:
        build_spec(str(path), [], [], site())
    assert str(info.value) == (f"{path}:2: --qos=normal is not a slurmx class QOS; use --qos=short (te) "
                               "or --qos=scavenger (be)")


def test_build_spec_missing_script(tmp_path: Path) -> None:
    path = tmp_path / "nope.sh"
    with pytest.raises(ConfigError) as info:
        build_spec(str(path), [], [], site())
    assert str(info.value) == f"{path}: no such file; pass a batch script or a job spec (.yaml)"


def test_build_spec_from_yaml_with_command_line_options(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: train\ncommand: python train.py\nsbatch: ['--account=proj']\n")
    spec, notes = build_spec(str(path), ["--time=30", "--exclusive", "-p", "cpu"], ["a b"], site(), ("gpu",))
    assert (spec.time_s, spec.args, spec.variants) == (1800, ("a b",), ("gpu",))
    assert spec.sbatch == ("--account=proj",) and spec.exclusive is True
    assert notes == []  # -p cpu chose the cpu kind; --variants gpu, later and slurmx's own, chose gpu


def test_build_spec_bad_time_from_a_directive(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --time=soon\ntrue\n")
    with pytest.raises(ConfigError) as info:
        build_spec(str(path), [], [], site())
    assert str(info.value) == f"{path}:2: --time=soon: expected a duration like 90s, 5m or 2-00:00:00, got 'soon'"


# ---------------------------------------------------------------------------------------------- known bugs

BUG_INDENTED = ("directives.py _directive_lines strips each line before matching '#SBATCH'; sbatch matches the magic "
                "word at column 0 only, so an indented '  #SBATCH ...' is a plain comment to sbatch but an option "
                "to slurmx")


def test_indented_sbatch_line_is_a_comment_as_in_sbatch() -> None:
    got = parse("#!/bin/bash\n#SBATCH -c 2\n  #SBATCH --account=disabled\n\t#SBATCH --mem=9G\ntrue\n")
    assert got.fields == {"cpus-per-task": "2"}
    assert got.passthrough == []
