"""`nmt study`: train and compare several models by sentence length."""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction") -> None:
    s = sub.add_parser(
        "study",
        help="train and compare several models by sentence length",
        description="Train each model of a study on the same data and budget, "
        "evaluate them with the same decoding and write one report. Resumable: "
        "models already trained in the study directory are skipped.",
    )
    s.add_argument("study", help="study YAML (e.g. configs/study/quick.yaml)")
    s.add_argument("--out", help="study directory (default: the study's out key)")
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key for every model, e.g. --set train.max_minutes=5",
    )
    s.add_argument(
        "--models",
        nargs="+",
        default=[],
        metavar="NAME",
        help="train and report only these models of the study (e.g. two now, the third "
        "later: a rerun without --models skips the trained ones and reports all)",
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="check every model's config and say what the study would train, resume, skip or "
        "score, without training or writing anything",
    )
    s.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.logs import setup_logging
    from nmt.study import run_study, study_plan

    setup_logging()
    if a.dry_run:
        print(study_plan(a.study, a.out, a.set, a.models))
        return 0
    out = run_study(a.study, a.out, a.set, a.models)
    print((out / "study.md").read_text(encoding="utf-8"))
    print(f"study report: {out}")
    return 0
