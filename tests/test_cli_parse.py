"""The top-level parser of ``fwd9m``: what a new user types that argparse alone refuses."""

from fwd9m.cli import main


def test_verbose_after_the_subcommand_is_the_same_as_before_it(tmp_path, capsys):
    """A new user typed ``fwd9m lint -v train.py`` and got "unrecognized arguments: -v"."""
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    assert main(["lint", "-v", str(script)]) == 0
    assert main(["-v", "lint", str(script)]) == 0
    assert "unrecognized" not in capsys.readouterr().err
    from fwd9m.cli import build_parser

    args = build_parser().parse_args(["-vv", "lint", "-v", str(script)])
    assert args.verbose + args.sub_verbose == 3  # counted together, as main does


def test_a_mistyped_command_or_choice_says_what_was_meant(capsys):
    for argv, meant in ((["chek", "x.py"], "'check'"), (["check", "--format", "jsn", "x.py"], "'json'")):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 2
        err = capsys.readouterr().err
        assert err.rstrip().endswith(f"did you mean {meant}?"), err
    try:
        main(["zzzzzz"])
    except SystemExit:
        pass
    assert "did you mean" not in capsys.readouterr().err


def test_resume_args_that_start_with_dashes_are_taken_as_documented():
    """``--resume-args "--resume"`` (docs/check.md, the report's Next steps) was
    "expected one argument"; the script's own arguments are left as they are."""
    from fwd9m.cli import _joined_values, build_parser

    argv = _joined_values(["check", "--resume", "--resume-args", "--resume", "train.py", "--resume-args", "x"])
    assert argv == ["check", "--resume", "--resume-args=--resume", "train.py", "--resume-args", "x"]
    args = build_parser().parse_args(argv)
    assert args.resume_args == "--resume" and args.program == ["train.py", "--resume-args", "x"]
