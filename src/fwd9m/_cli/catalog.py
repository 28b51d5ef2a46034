"""``fwd9m catalog``: search the known sources of nondeterminism, or show what is still
unsolved for the frameworks installed here (``--status``)."""

from __future__ import annotations

import json
import sys

HELP = "known sources of nondeterminism by framework, version, device and op (--status: yours)"
DESCRIPTION = """Search the catalog of known sources of nondeterminism. QUERY words must all
match (id, title, summary, symbols, ops); fields framework:, device:, version:, symbol:,
op:, kind:, id: are accepted inside QUERY too. --status lists, for the frameworks installed
here (versions from package metadata; nothing is imported), the sources the framework's
determinism switch does not fix, and what to do. Exit 0 ok (--status is a report: every
release has some unsolved source), 1 with --status --fail-on-unsolved when the list is not
empty, 2 bad query."""


def add_arguments(p) -> None:
    p.add_argument("query", nargs="*", metavar="QUERY", help="words or field:value filters")
    p.add_argument("--framework", "-f", help="tensorflow, keras, torch, jax or python")
    p.add_argument("--device", "-d", help="cpu, gpu (cuda) or tpu")
    p.add_argument(
        "--version", "-V", dest="fw_version", help="framework version to resolve behaviour for (needs --framework)"
    )
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    p.add_argument(
        "--status", action="store_true", help="unsolved sources for the frameworks installed here, and the fixes"
    )
    p.add_argument(
        "--fail-on-unsolved",
        action="store_true",
        help="with --status: exit 1 when any source is listed (a gate for CI; narrow "
        "it with --framework/--device/QUERY, since every release has some)",
    )


def _status_options(args) -> None:
    """Check --framework (also ``framework:NAME`` in the query) and --version once."""
    if args.query and not args.framework:  # framework:NAME in the query narrows --status like --framework
        from ..catalog._query import _parse_text

        args.framework = _parse_text(" ".join(args.query))[1].get("framework")
    if args.framework:
        from ..catalog._query import _check_framework

        args.framework = _check_framework(args.framework.lower())
    if args.fw_version is not None:  # one version for every framework would mean nothing
        from ..errors import CatalogError

        if not args.fw_version.strip():
            raise CatalogError(
                "--version is empty; give a value (e.g. -V 2.13) or leave it out to use the installed version"
            )
        if not args.framework:
            raise CatalogError(
                f"--version {args.fw_version} needs a framework (versions differ per "
                f"framework): fwd9m catalog --status -f torch -V {args.fw_version}"
            )


def _unsolved(args) -> list[tuple]:
    """(framework, version, switch, unsolved entries) for each framework asked about."""
    from .. import catalog

    frameworks = [args.framework] if args.framework else list(catalog.FRAMEWORKS)
    report = []
    for fw in frameworks:
        version = args.fw_version or catalog.installed_version(fw)
        if version is None:
            if args.framework:
                from ..errors import CatalogError

                raise CatalogError(f"{fw} is not installed here; pass --version to ask about one")
            continue
        found = catalog.unsolved(fw, version, args.device)
        if args.query:
            words = {e.id for e in catalog.query(" ".join(args.query), framework=fw)}
            found = [e for e in found if e.id in words]
        report.append((fw, version, catalog.switch(fw), found))
    return report


def _print_status_json(report: list[tuple]) -> None:
    from .. import catalog

    def _item(e, v):
        fix = catalog.advice(e, v)
        return {**e.to_dict(), "advice": {"text": fix.text, "code": fix.code} if fix else None}

    json.dump(
        [
            {
                "framework": fw,
                "version": v,
                "switch": sw.code_for(v) if sw else None,
                "unsolved": [_item(e, v) for e in found],
            }
            for fw, v, sw, found in report
        ],
        sys.stdout,
        indent=2,
    )
    print()


def _print_status_group(found: list, behaviour: str, heading: str, version: str, md: bool) -> None:
    from .. import catalog

    group = [e for e in found if e.behaviour == behaviour]
    if not group:
        return
    print(f"{'### ' if md else '  '}{heading} ({len(group)})")
    for e in group:
        device = ",".join(e.devices) or "-"
        print(f"{'- ' if md else '    '}{e.id} [{device}]: {e.title}")
        fix = catalog.advice(e, version)
        if fix:
            print(f"{'  ' if md else '      '}fix: {fix.text}")
            for line in fix.code.splitlines():
                print(f"{'      ' if md else '        '}{line}")


def _print_status_text(report: list[tuple], md: bool) -> None:
    for fw, version, sw, found in report:
        print(
            f"{'## ' if md else ''}{fw} {version}: {len(found)} known source(s) that the "
            "determinism switch does not fix"
        )
        code = sw.code_for(version) if sw else None
        if code:
            print(f"Turn the switch on first: `{code}`" if md else f"  Turn the switch on first: {code}")
        elif sw:
            print(f"  {fw} {version} has no determinism switch ({sw.name} needs {sw.since}+)")
        _print_status_group(
            found, "raises", "Raise under the switch: replace, move to another device, or avoid", version, md
        )
        _print_status_group(found, "nondeterministic", "Not fixed by the switch: apply the fix", version, md)
        print()
    if not report:
        print("no known framework is installed here")


def _status(args) -> int:
    _status_options(args)
    report = _unsolved(args)
    if args.format == "json":
        _print_status_json(report)
    else:
        _print_status_text(report, args.format == "markdown")
    return 1 if args.fail_on_unsolved and any(found for *_, found in report) else 0


def run(args) -> int:
    from .. import catalog
    from ..catalog import _render

    if args.status:
        return _status(args)
    if args.fail_on_unsolved:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            "--fail-on-unsolved applies to --status only: fwd9m catalog --status --fail-on-unsolved"
        )
    found = catalog.query(
        " ".join(args.query) or None, framework=args.framework, device=args.device, version=args.fw_version
    )
    if args.format == "json":
        print(_render.to_json(found))
    elif args.format == "markdown":
        print(_render.markdown(found), end="")
        if len(found) <= 5:
            print()
            for e in found:
                print(_render.details(e))
    else:
        print(_render.table(found))
        if found and (len(found) == 1 or args.query):  # a search: the best match in full
            print()
            print(_render.details(found[0]))
        if len(found) > 1:
            print(f"\n{len(found)} entries; details and the fix for one: fwd9m catalog {found[-1].id}")
    return 0
