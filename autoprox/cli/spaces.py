"""``autoprox spaces``: the search spaces installed, with their choices and parameter ranges."""

from __future__ import annotations

import argparse
import json

#: What this command prints is its product (a listing): a closed output pipe (``| head``) ends it with status 0
#: (:data:`autoprox.cli.main.LISTINGS`).
LISTING = True


def add_parser(sub) -> None:
    from autoprox.cli.options import add_space_file_option, positive_int

    spaces = sub.add_parser("spaces", help="list the search spaces installed (built-in, plug-ins, space files)",
                            description="List every search space autoprox knows: the built-in ones, plug-ins "
                                        "installed through the 'autoprox.spaces' entry-point group, and the space "
                                        "files given with --space-file; with their choices and ranges; then the packaged proxy-table "
                                        "spaces (nb201, flexibert), with their tables and targets.")
    spaces.add_argument("names", nargs="*", help="only these spaces (default: all)")
    spaces.add_argument("--classes", type=positive_int, default=100, help="classes of the head for the ranges (default 100)")
    spaces.add_argument("--json", action="store_true", help="print JSON")
    add_space_file_option(spaces)


def describe_space(space, classes: int) -> dict:
    """What ``autoprox spaces`` shows of one space."""
    from autoprox.core.errors import ArchitectureError
    from autoprox.spaces.registry import REGISTRY

    try:
        params, macs = space.param_range(classes), space.macs_range(classes)
    except ArchitectureError as exc:  # a plug-in whose extremes cannot be counted: say so, list the rest
        params = macs = None
        note = str(exc)
    else:
        note = ""
    entry = {"name": str(space.name), "summary": space.summary, "origin": REGISTRY.origins.get(str(space.name), "?"),
             "choices": space.choices(), "params": list(params) if params else None,
             "macs": list(macs) if macs else None, "classes": classes}
    if note:
        entry["note"] = note
    return entry


#: Longest description ``autoprox spaces`` prints (``--json`` gives it whole).
LONGEST_SUMMARY = 300


def _short(text: str) -> str:
    """A description on one line, cut to :data:`LONGEST_SUMMARY` characters."""
    text = " ".join(str(text).split())
    if len(text) <= LONGEST_SUMMARY:
        return text
    return f"{text[:LONGEST_SUMMARY]}... (cut: {len(text):,} characters; --json shows it whole)"


def _millions(span) -> str:
    return f"{span[0] / 1e6:.2f}M to {span[1] / 1e6:.2f}M" if span else "per architecture"


def run(args: argparse.Namespace) -> int:
    from autoprox.cli.options import use_space_files
    from autoprox.search.options import check_space
    from autoprox.spaces.registry import REGISTRY

    from autoprox.data.proxy_tables import table_space_names, table_space_summary

    use_space_files(args)
    # the packaged table spaces that are no ViT space (nb201, flexibert): labelled tables, no networks
    table_names = [n for n in table_space_names() if n not in REGISTRY.names()]
    if args.names:
        for name in args.names:
            if name not in table_names:
                check_space(name)  # an unknown name: the one message that lists the spaces and the proxy tables
        spaces = [REGISTRY.get(name) for name in args.names if name not in table_names]
        tables = [table_space_summary(name) for name in args.names if name in table_names]
    else:
        spaces, tables = REGISTRY.spaces(), [table_space_summary(name) for name in table_names]
    described = [describe_space(space, args.classes) for space in spaces]
    if args.json:
        print(json.dumps(described + [{"origin": "proxy table (packaged)", **t} for t in tables], indent=2))
        return 0
    for entry in described:
        print(f"{entry['name']}  ({entry['origin']})")
        print(f"    {_short(entry['summary'])}")
        macs = f"{entry['macs'][0] / 1e9:.2f}G to {entry['macs'][1] / 1e9:.2f}G" if entry["macs"] else "per architecture"
        print(f"    parameters {_millions(entry['params'])}, MACs {macs} ({args.classes}-class head)")
        width = max(len(k) for k in entry["choices"])
        for key, text in entry["choices"].items():
            print(f"    {key:<{width}}  {text}")
        if entry.get("note"):
            print(f"    ({entry['note']})")
    for entry in tables:
        print(f"{entry['name']}  (proxy table, packaged: no networks, scored from its columns; --space {entry['name']} "
              "in rank and evaluate)")
        print(f"    {_short(entry['summary'])}")
        print("    tables  " + ", ".join(f"{t['name']} (targets {', '.join(t['targets'])})" for t in entry["tables"]))
    for label, reason in REGISTRY.load_errors:
        print(f"not loaded: {label} ({reason})")
    return 0
