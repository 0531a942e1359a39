"""`nmt study`: train several models on the same data and budget, compare BLEU by source length.

A study YAML holds `base` (config sections shared by every model), `models` (name -> sections
merged over the base, or `run: PATH`: an existing run, ours or an import, scored on the study's
data beside the others and never trained), `evaluate` (split and beam, the same for every model;
a list of beams, e.g. [1, 5], evaluates each model with each and writes the joint report once per
beam, the first with the plain names, the others as study_beamK.md/.json and
bleu_by_length_beamK.png; with multilingual models `direction`, the one direction compared:
`nmt.study.scoring`) and `parallel` (how many models train side by side, default 1). The study
directory gets one run per model, their reports, and the joint report (`nmt.study.report`).
Finished models are skipped, interrupted ones resumed, so rerunning a study continues it.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from nmt.checkpoint import load_checkpoint
from nmt.config import Config
from nmt.config.load import (
    apply_overrides,
    check_trainable,
    dump_yaml,
    from_dict,
    load_config,
    merge_sections,
    to_dict,
    with_absolute_paths,
)
from nmt.config.yaml_file import read_yaml
from nmt.errors import NmtError
from nmt.files import atomic_write, locked
from nmt.jobs import evaluate as evaluate_job
from nmt.jobs import train as train_job
from nmt.logs import setup_logging
from nmt.run_dir import RunDir
from nmt.scoring.metrics import load_scores
from nmt.study import worker
from nmt.study.report import write_report
from nmt.study.scoring import (
    Scoring,
    check_direction_key,
    check_model,
    record_key,
    stale_scores,
)

log = logging.getLogger("nmt")
STUDY_KEYS = {"name", "out", "base", "models", "evaluate", "parallel"}


def load_study(path: str | Path) -> dict:
    path = Path(path)
    raw = read_yaml(path, "study")
    unknown = set(raw) - STUDY_KEYS
    if unknown:
        raise NmtError(
            f"unknown key '{sorted(unknown)[0]}' in {path}; expected one of {sorted(STUDY_KEYS)}"
        )
    models = raw.get("models")
    if models is None:
        raise NmtError(f"missing required key 'models' in {path} (name -> config sections)")
    if not isinstance(models, dict) or not models:
        got = "an empty mapping" if models == {} else f"{type(models).__name__} {models!r:.40}"
        raise NmtError(
            f"'models' in {path} must be a mapping of model name -> config sections "
            f"(e.g. models: {{rnnsearch: {{model: {{arch: rnnsearch}}}}}}), got {got}"
        )
    for key, value in [("base", raw.get("base"))] + [
        (f"models.{n}", v) for n, v in raw["models"].items()
    ]:
        if value is not None and not isinstance(value, dict):
            raise NmtError(
                f"'{key}' in {path} must be a mapping of config sections, got "
                f"{type(value).__name__}"
            )
    for name, over in raw["models"].items():
        if isinstance(over, dict) and "run" in over:
            if set(over) != {"run"} or not isinstance(over["run"], str) or not over["run"]:
                raise NmtError(
                    f"model '{name}' in {path}: 'run' names an existing run directory and "
                    f"stands alone (no other sections), e.g. run: runs/opus-it-en"
                )
    par = raw.get("parallel", 1)
    if isinstance(par, bool) or not isinstance(par, int) or par < 1:
        raise NmtError(f"'parallel' in {path} must be an integer >= 1, got {par!r}")
    ev = raw.get("evaluate") or {}
    if not isinstance(ev, dict) or set(ev) - {"split", "beam", "direction"}:
        raise NmtError(
            f"'evaluate' in {path} must be a mapping with keys split, beam and direction"
        )
    check_direction_key(ev, path)
    beams = ev.get("beam", 1)
    beams = beams if isinstance(beams, list) and beams else [beams]
    if len(set(map(repr, beams))) < len(beams) or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in beams
    ):
        raise NmtError(
            f"'evaluate.beam' in {path} must be an integer >= 1 or a list of different ones "
            f"(e.g. [1, 5]: greedy and beam 5), got {ev.get('beam')!r}"
        )
    if not isinstance(ev.get("split", "test"), str):
        raise NmtError(f"'evaluate.split' in {path} must be a split role such as test or valid")
    return raw


def select_models(study: dict, path: str, names: Sequence[str]) -> dict:
    """The study restricted to `names` (in the study's order, so its first model stays the
    reference); every name must be one of the study's models."""
    if not names:
        return study
    have = list(study["models"])
    for name in names:
        if name not in have:
            close = difflib.get_close_matches(name, have, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise NmtError(
                f"--models: no model '{name}' in {path} (it has: {', '.join(have)}){hint}"
            )
    return {**study, "models": {n: v for n, v in study["models"].items() if n in names}}


def model_configs(study: dict, path: str, out: Path, overrides: list[str] = ()) -> dict[str, Any]:
    """Each model's validated Config: base merged with its overrides (then --set), run_dir
    inside the study; for a model that names an existing run, see `existing_run_config`."""
    configs = {}
    scoring = Scoring.of(study)
    split = scoring.split
    for name, over in study["models"].items():
        where = f"{path} (model '{name}')"
        if existing_run(over):
            configs[name] = existing_run_config(study, over["run"], where)
        else:
            raw = merge_sections(study.get("base") or {}, over or {})
            raw = apply_overrides(raw, list(overrides))
            raw.setdefault("train", {})["run_dir"] = str(out / name)
            # input paths stored absolute: configs/NAME.yaml and RUN/config.yaml read the same
            # files from any working directory
            cfg = configs[name] = with_absolute_paths(from_dict(raw, where))
            check_trainable(cfg, where)
        if split not in configs[name].data.splits:  # caught now, not after hours of training
            raise NmtError(
                f"'evaluate.split' in {path} is '{split}', which model '{name}' does "
                f"not name in 'data.splits' (have: {', '.join(configs[name].data.splits)})"
            )
        check_model(scoring, name, configs[name], existing_run(over), path)
    return configs


def existing_run(over: Any) -> Optional[str]:
    """The run directory a study model names with `run: PATH` (scored, never trained)."""
    return over.get("run") if isinstance(over, dict) else None


def existing_run_config(study: dict, run_path: str, where: str) -> Config:
    """An existing run (ours, or one `nmt import hf` made) as the study scores it: its own model
    and subwords, the study's data, decoding and scoring (`base.data`, `base.decode`, `base.eval`),
    so it is scored on the same sentences in the same way as the study's trained models."""
    run = RunDir(run_path)
    if not run.config.is_file():
        raise NmtError(
            f"{where}: run: {run_path} is not a run directory (no {RunDir.CONFIG}; a run is "
            f"made by nmt train or nmt import hf)"
        )
    base = study.get("base") or {}
    if not isinstance(base.get("data"), dict):
        raise NmtError(
            f"{where}: a model that names a run is scored on the study's data: "
            f"the study needs a 'base.data' section"
        )
    raw = to_dict(load_config(run.config, stored=True))
    raw["data"] = base["data"]
    for section in ("decode", "eval"):
        raw[section] = {**raw[section], **(base.get(section) or {})}
    return with_absolute_paths(from_dict(raw, where, stored=True))


def _train_and_evaluate(
    name: str,
    cfg_dict: dict,
    where: str,
    scoring: Scoring,
    beams: list[int],
    home: str,
    existing: Optional[str] = None,
) -> dict[int, dict]:
    """One model of a study: train (or resume, or skip when done) and evaluate with each beam,
    or only evaluate the `existing` run; its results by beam, its reports in `home` (the model's
    folder of the study). A mistake is one line naming the model, whichever process it
    happened in."""
    try:
        return _run_model(name, cfg_dict, where, scoring, beams, Path(home), existing)
    except NmtError as e:
        raise NmtError(f"study model '{name}': {e}") from None
    finally:
        # A worker whose study died takes no next model (the pool may have queued one) and
        # does not wait for work that will never come.
        if worker.study_is_gone():
            os._exit(143)


def _run_model(
    name: str,
    cfg_dict: dict,
    where: str,
    scoring: Scoring,
    beams: list[int],
    home: Path,
    existing: Optional[str],
) -> dict:
    if worker.stop_requested():
        raise NmtError("not started: another model failed")
    if worker.study_is_gone():
        raise NmtError("not started: the study's process is gone")
    cfg = from_dict(cfg_dict, where, stored=existing is not None)
    setup_logging(tag=name)
    if existing is not None:
        return _scored_existing(name, cfg, RunDir(existing), RunDir(home), scoring, beams)
    run = RunDir(cfg.train.run_dir)

    def waiting() -> None:
        log.info(f"study: waiting for the process still training {name} in {run.path} to stop")

    # one process per model: a worker of an earlier, killed run of the study may still be
    # saving its checkpoint
    with locked(run.path.parent / f".{run.path.name}.lock", waiting):
        return _trained_and_scored(name, cfg, run, where, scoring, beams)


def training_state(run: RunDir, cfg: Config) -> str:
    """What a study does with a model's run: "trained" (finished with this config: skipped; a
    change to what it trains makes the old run stale, a change to how it is scored, the
    `eval` section, only its scores), "resume" (its checkpoints, same config) or "new"."""
    if run.trained_reason() is not None and run.same_config(cfg, training_only=True):
        return "trained"
    return "resume" if run.same_config(cfg) and run.step_checkpoints() else "new"


def _trained_and_scored(
    name: str, cfg: Config, run: RunDir, where: str, scoring: Scoring, beams: list[int]
) -> dict:
    """The model trained (resumed, or skipped when done) and its scores by beam."""
    state = training_state(run, cfg)
    if state == "trained":
        log.info(f"study: {name} already trained in {run.path}, skipping training")
        if not run.same_config(cfg):
            run.create(cfg)  # the stored config is what `nmt evaluate RUN` scores by
            _forget_scores(run, scoring, beams)
    else:
        resume = state == "resume"
        log.info(f"study: training {name} ({'resuming' if resume else 'new run'})")
        result = train_job.train(
            cfg, resume=resume, overwrite=not resume, log_tag=name, where=where
        )
        if result.interrupted:  # the checkpoint is kept: rerunning the study resumes it
            raise NmtError(f"training was {result.stop_reason}; rerun the study to resume it")
        if cfg.train.max_steps and result.stop_reason.startswith("reached max_minutes"):
            log.warning(
                f"study: {name} hit its time cap before its {cfg.train.max_steps}-step "
                f"budget: this machine is slower than the study was planned for, so "
                f"its results may differ from the README's"
            )
        run.mark_trained(result.stop_reason)
        _forget_scores(run, scoring, beams)  # an older model's
    ck = load_checkpoint(run.checkpoint(prefer="latest"))  # the time of the whole run
    facts = {
        "params": ck["params"],
        "steps": ck["step"],
        "stop_reason": run.trained_reason(),
        "train_seconds": ck["progress"]["train_seconds"],
    }
    return {
        beam: {**_evaluated(name, run, cfg, scoring, beam, beams=beams), **facts} for beam in beams
    }


def _scored_existing(
    name: str, cfg: Config, run: RunDir, home: RunDir, scoring: Scoring, beams: list[int]
) -> dict:
    """An existing run's scores by beam on the study's data, its reports in `home`; a report
    scored under another key (the run trained on since, or the study's data, decoding or
    scoring changed: `Scoring.key`) is scored again."""
    checkpoint = run.checkpoint()
    ck = load_checkpoint(checkpoint)
    facts = {
        "params": ck["params"],
        "steps": ck["step"],
        "stop_reason": f"an existing run: {run.path}",
        "train_seconds": (ck.get("progress") or {}).get("train_seconds"),
    }
    results = {}
    for beam in beams:
        report, key = scoring.report(home, beam), scoring.key(cfg, checkpoint, beam)
        scores = report / "scores.json"
        if scores.is_file():
            old = load_scores(report)
            scored = Path(old.get("checkpoint") or "").resolve(), old.get("step")
            if stale_scores(report, key) or scored != (checkpoint.resolve(), ck["step"]):
                scores.unlink()
        home.path.mkdir(parents=True, exist_ok=True)
        results[beam] = {**_evaluated(name, run, cfg, scoring, beam, home, beams), **facts}
        record_key(report, key)
    return results


def _forget_scores(run: RunDir, scoring: Scoring, beams: list[int]) -> None:
    """Drop the run's study scores, so each beam is evaluated again."""
    for beam in beams:
        (scoring.report(run, beam) / "scores.json").unlink(missing_ok=True)


def _evaluated(
    name: str,
    run: RunDir,
    cfg: Config,
    s: Scoring,
    beam: int,
    home: Optional[RunDir] = None,
    beams: Sequence[int] = (),
) -> dict:
    """The model's scores with this beam, evaluated now unless a report holds them; scored as
    the study's `eval` section says, which may have changed since the model was trained. The
    report goes into `home` (default: the run), on `cfg`'s data with `cfg`'s decoding; the loss
    by length is the first of `beams`' report's when that one holds it for the same model."""
    report = s.report(home or run, beam)
    first = s.report(home or run, beams[0]) if beams and beams[0] != beam else None
    if not (report / "scores.json").is_file():
        log.info(f"study: evaluating {name} on {s.split}{s.suffix} (beam {beam})")
        opts = evaluate_job.EvalOptions(
            split=s.split,
            beam=beam,
            report_dir=str(report),
            progress=False,
            buckets=list(cfg.eval.buckets),
            min_bucket=cfg.eval.min_bucket,
            metrics=tuple(cfg.eval.metrics),
            data=cfg.data,
            overrides=dataclasses.asdict(cfg.decode),
            loss_from=str(first) if first else None,
            **s.options(),  # a multilingual model: the direction, its tag put in by evaluate
        )
        evaluate_job.evaluate(str(run.path), opts)
    return load_scores(report)


def budget(cfg) -> str:
    """A model's training budget in words: steps, plateau stop and time cap."""
    t = cfg.train
    parts = [f"{t.max_steps} steps" if t.max_steps else "no step limit"]
    if t.max_epochs:
        parts.append(f"at most {t.max_epochs} epochs")
    if t.patience:
        parts.append(f"stop after {t.patience} validations without improvement")
    if t.max_minutes:
        parts.append(f"time cap {t.max_minutes:g} min")
    return ", ".join(parts)


def _checked(path: str, out: Optional[str], overrides: list[str], models: Sequence[str]):
    """The study at `path` with every model's config checked, before anything is written:
    (study, its directory, configs, scoring, beams, existing runs by model)."""
    study = select_models(load_study(path), path, models)
    out_dir = Path(out or study.get("out") or Path("studies") / Path(path).stem)
    configs = model_configs(study, path, out_dir, overrides)
    scoring, beams = Scoring.of(study), (study.get("evaluate") or {}).get("beam", 1)
    beams = beams if isinstance(beams, list) else [beams]
    runs = {name: existing_run(over) for name, over in study["models"].items()}
    return study, out_dir, configs, scoring, beams, runs


def study_plan(
    path: str,
    out: Optional[str] = None,
    overrides: list[str] = (),
    models: Sequence[str] = (),
) -> str:
    """What `run_study` would do, in words, with every config checked as it checks them; trains,
    writes and creates nothing (`nmt study --dry-run`)."""
    study, out_dir, configs, scoring, beams, runs = _checked(path, out, overrides, models)
    what = (study.get("evaluate") or {}).get("split", "test")
    lines = [
        f"study {path} -> {out_dir}: {len(configs)} model(s), {study.get('parallel', 1)} at a "
        f"time; each scored on split '{what}' with beam {', '.join(map(str, beams))}"
    ]
    for name, cfg in configs.items():
        if runs[name]:
            lines.append(f"  {name}: the existing run {runs[name]}, scored only")
            continue
        run = RunDir(cfg.train.run_dir)
        state = {
            "trained": f"already trained in {run.path}: scored only",
            "resume": f"resumes {run.path} from its last checkpoint",
            "new": f"trains a new run in {run.path}",
        }[training_state(run, cfg)]
        lines.append(f"  {name}: {cfg.model.arch}, {budget(cfg)}; {state}")
    return "\n".join(lines)


def run_study(
    path: str,
    out: Optional[str] = None,
    overrides: list[str] = (),
    models: Sequence[str] = (),
) -> Path:
    """Train and evaluate every model of the study at `path` (or only `models`); write its
    report (study.md, study.json, bleu_by_length.png) into the study directory, which is
    returned."""
    study, out_dir, configs, scoring, beams, runs = _checked(path, out, overrides, models)
    for name, cfg in configs.items():
        if runs[name]:
            log.info(f"study: {name}: the existing run {runs[name]}, scored only")
        else:
            log.info(
                f"study: {name}: {budget(cfg)}; the expected time is logged after its first "
                f"{cfg.train.log_every} steps"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "configs").mkdir(exist_ok=True)
    for name, cfg in configs.items():
        if not runs[name]:  # a config to train: an existing run's is in its own directory
            atomic_write(out_dir / "configs" / f"{name}.yaml", dump_yaml(cfg))
    jobs = {
        name: (
            name,
            to_dict(cfg),
            f"{path} (model '{name}')",
            scoring,
            beams,
            str(out_dir / name),
            runs[name],
        )
        for name, cfg in configs.items()
    }
    workers = int(study.get("parallel", 1))
    if workers > 1:
        results = worker.run_side_by_side(_train_and_evaluate, jobs, configs, workers)
    else:
        results = {name: _train_and_evaluate(*job) for name, job in jobs.items()}
    existing = {name: run for name, run in runs.items() if run}
    for i, beam in enumerate(beams):  # the first beam's report has the plain names
        by_model = {name: r[beam] for name, r in results.items()}
        suffix = "" if i == 0 else f"_beam{beam}"
        write_report(study, path, out_dir, configs, by_model, scoring, beam, suffix, existing)
    return out_dir
