"""``autoprox select``: a finished run's proxy, chosen by a selection rule, written as a proxy file."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    from autoprox.apps.selection import SELECTIONS

    select = sub.add_parser("select", help="choose a finished run's proxy by a selection rule (best, cv-pick, ...) "
                                           "and write it as a proxy file for rank, export and vit-search")
    select.add_argument("run", help="a finished run directory")
    select.add_argument("--selection", default="cv-pick", choices=sorted(SELECTIONS),
                        help="the rule (the ones autoprox evaluate compares; default cv-pick)")
    select.add_argument("--out", required=True, help="the proxy file to write (refused if it exists)")
    select.add_argument("--target", default=None,
                        help="keep only what the rule chose for this target: a proxy that scores every target alike")


def run(args: argparse.Namespace) -> int:
    from autoprox.apps.selection import write_selection
    from autoprox.apps.folders import refuse_other_folder
    from autoprox.proxies.ensemble import EnsembleProxy

    refuse_other_folder(args.run, "select")

    path, selected = write_selection(args.run, args.selection, args.out, target=args.target)
    if isinstance(selected, EnsembleProxy):
        parts = {target: " + ".join(m.label for m in members) for target, members in selected.members.items()}
        print(f"wrote {path}: {selected.name}, " + "; ".join(f"{t}: {p}" for t, p in parts.items()))
    else:
        print(f"wrote {path}: {selected.name}")
    return 0
