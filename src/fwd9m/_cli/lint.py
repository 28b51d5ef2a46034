"""``fwd9m lint``: static rules for reproducibility pitfalls."""

from __future__ import annotations

import sys

HELP = "check source files for reproducibility pitfalls (static rules FWDnnn)"
DESCRIPTION = (
    "Check Python files for reproducibility pitfalls: seeding, settings that defeat "
    "determinism, data pipelines, ordering and hashing, checkpoints, JAX keys and ops "
    "the catalog lists as nondeterministic. Exit 0 clean, 1 findings, 2 error. "
    "Configure in pyproject.toml under [tool.fwd9m.lint]; silence a line with "
    "'# noqa: FWD101'. --fix applies the safe fixes of the rules that carry one (--unsafe-fixes: "
    "also those that change results on purpose; --diff: print them, write nothing) to the files "
    "named and those found in the folders named (not to the local modules a script imports, nor "
    "through a link out of a folder named); --fix and --diff do not read standard input ('-')."
)


def add_arguments(p) -> None:
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders to check ('-' reads standard input); default: ."
    )
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    p.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="only these rules (comma-separated codes, prefixes like FWD3, names, ALL)",
    )
    p.add_argument(
        "--extend-select",
        action="append",
        metavar="CODES",
        help="rules to add to the selection (e.g. opt-in rules such as FWD309)",
    )
    p.add_argument("--ignore", action="append", metavar="CODES", help="rules to leave out")
    p.add_argument("--explain", metavar="CODE", help="print a rule's documentation (ALL: list every rule)")
    p.add_argument("--statistics", action="store_true", help="also print the number of findings per rule")
    p.add_argument(
        "--stdin-filename",
        default="<stdin>",
        metavar="NAME",
        help="the name to report for '-' (and to match per-file-ignores)",
    )
    p.add_argument(
        "--config", metavar="PYPROJECT", help="pyproject.toml to read [tool.fwd9m.lint] from (default: nearest one)"
    )
    p.add_argument("--isolated", action="store_true", help="ignore pyproject.toml configuration")
    p.add_argument(
        "--fix",
        action="store_true",
        help="apply the safe fixes of the rules that carry one (a file is written only if unchanged since read;"
        " not with '-')",
    )
    p.add_argument(
        "--unsafe-fixes", action="store_true", help="with --fix or --diff: also the fixes that change results"
    )
    p.add_argument("--diff", action="store_true", help="print the fixes as a unified diff instead of writing them")


def _split(values) -> list[str]:
    return [c.strip() for v in values or () for c in v.split(",") if c.strip()]


def _explain(code: str) -> int:
    from ..lint import all_rules, get_rule

    if code.upper() == "ALL":
        for c, r in all_rules().items():
            flag = "" if r.default else "  (opt-in)"
            print(f"{c} {r.name}{flag}: {r.summary()}")
        return 0
    r = get_rule(code)
    print(f"{r.code} {r.name}{'' if r.default else ' (opt-in: not in the default selection)'}\n")
    print(r.doc())
    if r.references:
        print("\nReferences:")
        for ref in r.references:
            print(f"  {ref}")
    return 0


def _outside(name: str, named: list[str]) -> str:
    """Why ``name`` (a file linted) is not to be fixed, or "" when it is: a file named, or
    found in a folder named and not a link out of it."""
    from pathlib import Path

    from .._files import shown

    path = Path(name)
    if any(Path(n) == path for n in named):
        return ""
    folders = [Path(n) for n in named if Path(n).is_dir() and path.is_relative_to(Path(n))]
    if not folders:
        return f"{shown(name)}: not fixed: read as a module a script imports (name it to fix it)"
    if not any(path.resolve().is_relative_to(f.resolve()) for f in folders):
        return f"{shown(name)}: not fixed: a link to a file outside {shown(folders[0])}"
    return ""


def _fix(args, findings, config, named: list[str]) -> bool:
    """Print (``--diff``) or make (``--fix``) the fixes of the files ``named`` or found in
    the folders named (:func:`_outside`); say what changed and what was left out. True
    when some file has a fix."""
    from .._files import shown
    from ..fix._lint import apply, plan_paths

    fixes = plan_paths(findings, config, unsafe=args.unsafe_fixes)
    for f in fixes:
        f.skipped = f.skipped or _outside(str(f.path), named)
        if f.skipped:
            print(f"fwd9m lint: {f.skipped}", file=sys.stderr)
    fixes = [f for f in fixes if not f.skipped]
    changed = [f for f in fixes if f.after != f.before]
    if args.diff:
        sys.stdout.write("".join(f.diff() for f in changed))
    else:
        refused = apply(changed)
        for line in refused:
            print(f"fwd9m lint: {line}", file=sys.stderr)
        changed = [f for f in changed if not any(r.startswith(f"{shown(f.path)}:") for r in refused)]
        for f in changed:
            for line in f.fixed:
                print(line, file=sys.stderr)
    n = sum(len(f.fixed) for f in changed)  # the files written only: a refused one is not fixed
    left = sum(f.unsafe_left for f in fixes)
    verb = "would fix" if args.diff else "fixed"
    print(
        f"fwd9m lint: {verb} {n} finding{'s' * (n != 1)} in {len(changed)} file{'s' * (len(changed) != 1)}"
        + (f"; {left} more with --unsafe-fixes" if left else ""),
        file=sys.stderr,
    )
    return bool(changed)


def _config(args, paths: list[str]):
    """The lint configuration: pyproject.toml's (or none, ``--isolated``), then the
    command line's selection."""
    from pathlib import Path

    from ..lint import find_pyproject, load_config
    from ..lint._config import Config, expand_codes

    if args.isolated:
        config = Config()
    elif args.config:
        config = load_config(Path(args.config))
    else:
        first = next((Path(p) for p in paths if p != "-"), Path.cwd())
        config = load_config(find_pyproject(first if first.exists() else Path.cwd()))
    if args.select:
        config.select = _split(args.select)
        expand_codes(config.select, "--select")
    if args.extend_select:
        config.extend_select = [*config.extend_select, *_split(args.extend_select)]
        expand_codes(config.extend_select, "--extend-select")
    if args.ignore:
        config.ignore = [*config.ignore, *_split(args.ignore)]
        expand_codes(config.ignore, "--ignore")
    return config


def run(args) -> int:
    from pathlib import Path

    from ..lint import lint_paths
    from ..lint._report import render_json, render_sarif, render_statistics, render_text

    if args.explain is not None:  # --explain "" is an unknown rule, not "lint ."
        return _explain(args.explain)
    paths = args.paths or ["."]
    if (args.fix or args.diff) and "-" in paths:  # nothing to write to, and the text is read once
        from ..errors import ConfigurationError

        raise ConfigurationError("--fix and --diff fix files: they do not read standard input ('-'); name the file")
    named = list(paths)
    config = _config(args, paths)
    scripts = [Path(p) for p in paths if p != "-" and p.endswith(".py") and Path(p).is_file()]
    follow = bool(scripts) and len(scripts) == len(paths)  # scripts: also the local modules they import
    imports: dict[str, list[str]] | None = {} if follow else None
    report = lint_paths(paths, config, stdin_name=args.stdin_filename, imports=imports)
    if follow:
        from .._files import shown
        from ..lint._imports import imported_files

        extra = imported_files(scripts, known=imports)  # from the trees parsed above
        if extra:
            shown_extra = ", ".join(map(shown, extra))
            print(f"fwd9m lint: also reading {shown_extra} (imported)", file=sys.stderr)
            more = lint_paths(list(map(str, extra)), config, stdin_name=args.stdin_filename)
            report.findings.extend(more.findings)
            report.files += more.files
        paths = [*paths, *map(str, extra)]
    if args.fix or args.diff:
        if _fix(args, report.findings, config, named) and args.diff:
            return 1
        if args.diff:
            return 0
        report = lint_paths(paths, config, stdin_name=args.stdin_filename)  # what is left
    findings = sorted(report.findings, key=lambda f: f.sort_key())
    if args.format == "json":
        print(render_json(findings, report.files))
    elif args.format == "sarif":
        print(render_sarif(findings, config.rules()))
    else:
        if findings:
            print(render_text(findings))
        if args.statistics:
            if findings:
                print()
            print(render_statistics(report.statistics()))
        n = len(findings)
        print(
            f"fwd9m lint: {n or 'no'} finding{'s' if n != 1 else ''} in {report.files} file"
            f"{'s' if report.files != 1 else ''}" + ("; `fwd9m lint --explain CODE` explains a rule" if n else ""),
            file=sys.stderr,
        )
    return 1 if findings else 0
