"""End to end through the command line: evaluate, translate, compare, study and data synth.

Tiny models are trained once per module on a small synthetic corpus written as local files (with
an extra split named in the config) and shared by every test; each test runs `nmt` as a user
would, in-process through `main` or, where stdin/stdout matter, as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import sacrebleu
import yaml

from conftest import TINY_MODELS, tiny_config, tiny_model, write_yaml
from nmt.checkpoint import load_checkpoint, step_checkpoints
from nmt.cli import main
from nmt.config import SyntheticConfig
from nmt.config.load import load_config
from nmt.data.synthetic import write_corpus
from nmt.jobs import train as train_job

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEFAULT_RANGES = [(1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, None)]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG_MAGIC


def scores_of(report: Path) -> dict:
    return json.loads((report / "scores.json").read_text())


def run_nmt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m nmt ARGS` as a user runs it; one thread, as in-process training used."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "nmt", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Synthetic train/valid/test files plus an 'extra' split (the first 7 test pairs)."""
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(
        out,
        replace(SyntheticConfig(), train=400, valid=30, test=30, lexicon=30, max_words=14, seed=3),
    )
    for side in ("src", "tgt"):
        first = lines(out / f"test.{side}")[:7]
        (out / f"extra.{side}").write_text("".join(l + "\n" for l in first))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, corpus) -> dict[str, Path]:
    """One tiny trained run per architecture, validated once (greedy, full valid set) at the end."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    splits = {"train": "train", "valid": "valid", "test": "test", "extra": "extra"}
    for arch in TINY_MODELS:
        cfg = tiny_config(
            arch=arch,
            data={"source": "local", "path": str(corpus), "splits": splits},
            train={"run_dir": str(root / arch), "max_steps": 30},
            decode={"beam": 2},
        )
        out[arch] = train_job.train(load_config(write_yaml(root / f"{arch}.yaml", cfg))).run
    return out


@pytest.fixture(scope="module")
def reports(runs, tmp_path_factory) -> dict[str, Path]:
    """`nmt evaluate RUN --split test --beam 2 --report DIR` for rnnsearch and transformer."""
    root = tmp_path_factory.mktemp("reports")
    out = {}
    for arch in ("rnnsearch", "transformer"):
        out[arch] = root / arch
        assert (
            main(
                [
                    "evaluate",
                    str(runs[arch]),
                    "--split",
                    "test",
                    "--beam",
                    "2",
                    "--report",
                    str(out[arch]),
                ]
            )
            == 0
        )
    return out


# ---------------------------------------------------------------------------------- evaluate


def test_scores_json_records_the_decode_settings_the_flags_chose(runs, tmp_path):
    report = tmp_path / "report"
    args = ["evaluate", str(runs["transformer"]), "--split", "test", "--report", str(report)]
    assert main([*args, "--beam", "3", "--alpha", "1.4"]) == 0
    decode = scores_of(report)["decode"]
    assert (decode["beam"], decode["alpha"], decode["int8"]) == (3, 1.4, False)
    assert {"max_len_a", "max_len_b", "no_repeat_ngram"} <= set(decode)


def test_evaluate_run_dir_prints_scores_and_writes_report(runs, corpus, tmp_path, capsys):
    report = tmp_path / "report"
    assert (
        main(
            [
                "evaluate",
                str(runs["rnnsearch"]),
                "--split",
                "test",
                "--beam",
                "2",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    scores = scores_of(report)
    lo, hi = scores["bleu_ci"]
    assert lo <= scores["bleu"] <= hi
    assert (
        f"BLEU = {scores['bleu']:.2f} [{lo:.2f}, {hi:.2f}] (signature {scores['signature']})" in out
    )
    assert "nrefs:1" in scores["signature"] and "tok:13a" in scores["signature"]
    assert f"chrF = {scores['chrf']:.2f} [" in out
    assert f"checkpoint: {runs['rnnsearch'] / 'best.pt'} (step 30)" in out
    scores_table, length_table = out.split("Output length against the reference:")
    labels = re.findall(r"^\|\s+(\d+[-+]\d*|all)\s+\|", scores_table, re.M)
    assert "source words" in out and labels == ["1-10", "11-20", "all"]  # sentences of <= 14 words
    assert re.findall(r"^\|\s+(\d+[-+]\d*|all)\s+\|", length_table, re.M) == labels
    assert "Empty buckets not shown: 21-30, 31-40, 41-50, 51+ source words" in out

    srcs, refs = lines(corpus / "test.src"), lines(corpus / "test.tgt")
    hyps = lines(report / "hyps.txt")
    assert len(hyps) == len(srcs) == scores["n"] == 30
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert [(b["lo"], b["hi"]) for b in scores["buckets"]] == DEFAULT_RANGES
    assert all(
        set(b) == {"lo", "hi", "n", "bleu", "chrf", "bleu_ci", "chrf_ci", "length"}
        for b in scores["buckets"]
    )
    assert scores["test_set"]["split"] == "test" and scores["test_set"]["n"] == 30
    assert sum(b["n"] for b in scores["buckets"]) == 30
    assert is_png(report / "bleu_by_length.png")


def test_evaluate_checkpoint_file_alone_matches_run_dir(runs, reports, tmp_path, capsys):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(runs["rnnsearch"] / "best.pt", alone / "model.pt")
    assert main(["evaluate", str(alone / "model.pt"), "--split", "test", "--beam", "2"]) == 0
    report = alone / "eval_test_beam2"  # default report dir: beside the checkpoint
    assert report.is_dir(), capsys.readouterr().out
    assert lines(report / "hyps.txt") == lines(reports["rnnsearch"] / "hyps.txt")
    got, ref = scores_of(report), scores_of(reports["rnnsearch"])
    assert (got["bleu"], got["chrf"], got["buckets"]) == (ref["bleu"], ref["chrf"], ref["buckets"])


def test_evaluate_any_named_split_and_src_ref_files(runs, corpus, tmp_path):
    assert (
        main(
            [
                "evaluate",
                str(runs["transformer"]),
                "--split",
                "extra",
                "--beam",
                "1",
                "--report",
                str(tmp_path / "split"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "evaluate",
                str(runs["transformer"]),
                "--src",
                str(corpus / "extra.src"),
                "--ref",
                str(corpus / "extra.tgt"),
                "--beam",
                "1",
                "--report",
                str(tmp_path / "files"),
            ]
        )
        == 0
    )
    by_split, by_files = scores_of(tmp_path / "split"), scores_of(tmp_path / "files")
    assert by_split["n"] == by_files["n"] == 7
    assert lines(tmp_path / "split" / "hyps.txt") == lines(tmp_path / "files" / "hyps.txt")
    assert by_split["bleu"] == by_files["bleu"]
    # without --report and --beam: RUN/eval_SPLIT_beamK with the config's beam (2)
    assert main(["evaluate", str(runs["transformer"]), "--split", "extra"]) == 0
    assert scores_of(runs["transformer"] / "eval_extra_beam2")["n"] == 7


def test_evaluate_unknown_split_is_a_one_line_error(runs, capsys):
    assert main(["evaluate", str(runs["transformer"]), "--split", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error:") and "nosuch" in err and "\n" not in err


def test_evaluate_buckets_option_changes_the_buckets(runs, tmp_path):
    report = tmp_path / "r"
    assert (
        main(
            [
                "evaluate",
                str(runs["transformer"]),
                "--split",
                "test",
                "--beam",
                "1",
                "--buckets",
                "5,10",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    buckets = scores_of(report)["buckets"]
    assert [(b["lo"], b["hi"]) for b in buckets] == [(1, 5), (6, 10), (11, None)]
    assert sum(b["n"] for b in buckets) == 30


def test_evaluate_reports_the_metrics_the_runs_config_names(runs, tmp_path):
    """A recipe's eval.metrics (here with lowercased BLEU) is what `nmt evaluate` reports without
    --metrics; --metrics still chooses for itself."""
    import torch

    ckpt = load_checkpoint(runs["transformer"] / "best.pt")
    ckpt["config"]["eval"]["metrics"] = ["bleu", "bleu_lc"]
    torch.save(ckpt, tmp_path / "model.pt")
    args = ["evaluate", str(tmp_path / "model.pt"), "--split", "test", "--beam", "1"]
    assert main([*args, "--report", str(tmp_path / "r1")]) == 0
    scores = scores_of(tmp_path / "r1")
    assert "case:lc" in scores["bleu_lc_signature"] and "chrf" not in scores
    assert scores["bleu_lc"] >= scores["bleu"]  # lowercasing can only add matches here
    assert main([*args, "--metrics", "chrf", "--report", str(tmp_path / "r2")]) == 0
    assert "chrf" in scores_of(tmp_path / "r2") and "bleu_lc" not in scores_of(tmp_path / "r2")


def test_evaluate_merges_thin_length_buckets_and_says_so(runs, tmp_path, capsys):
    import torch

    ckpt = load_checkpoint(runs["transformer"] / "best.pt")
    ckpt["config"]["eval"]["min_bucket"] = 8
    torch.save(ckpt, tmp_path / "model.pt")
    report = tmp_path / "r"
    args = ["evaluate", str(tmp_path / "model.pt"), "--split", "test", "--beam", "1"]
    assert main([*args, "--buckets", "3,6,9,12", "--report", str(report)]) == 0
    scores = scores_of(report)
    assert all(b["n"] >= 8 for b in scores["buckets"]) and len(scores["buckets"]) < 5
    assert sum(b["n"] for b in scores["buckets"]) == 30
    assert scores["bucket_merge"] == {"asked": [3, 6, 9, 12], "min_sentences": 8}
    assert "Buckets merged so that each holds at least 8 sentences" in capsys.readouterr().out


@pytest.mark.parametrize("arch", ["rnnsearch", "transformer"])
def test_training_valid_bleu_equals_greedy_evaluate(runs, tmp_path, arch):
    run = runs[arch]
    step = load_checkpoint(run / "best.pt")["step"]
    rows = [json.loads(l) for l in lines(run / "metrics.jsonl")]
    valid = [r for r in rows if r["split"] == "valid" and r["step"] == step]
    assert valid, "no validation row for the best checkpoint's step"
    report = tmp_path / "valid"
    assert (
        main(
            [
                "evaluate",
                str(run / "best.pt"),
                "--split",
                "valid",
                "--beam",
                "1",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    scores = scores_of(report)
    assert scores["n"] == 30
    assert scores["bleu"] == valid[-1]["bleu"]
    assert scores["chrf"] == valid[-1]["chrf"]


# ---------------------------------------------------------------------------------- attention


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("rnnsearch", []),
        ("transformer", []),
        ("transformer", ["--attention-layer", "0", "--attention-head", "1"]),
    ],
)
def test_attention_plots_are_pngs(runs, tmp_path, arch, extra):
    report = tmp_path / "r"
    assert (
        main(
            [
                "evaluate",
                str(runs[arch]),
                "--split",
                "extra",
                "--beam",
                "2",
                "--attention-plots",
                "2",
                "--report",
                str(report),
                *extra,
            ]
        )
        == 0
    )
    plots = sorted(report.glob("attention_*.png"))
    assert len(plots) == 2
    assert all(is_png(p) for p in plots)


def test_transformer_attention_layer_and_head_select_different_maps(runs, tmp_path):
    """Head 1 of layer 0 is not the default (mean of heads, last layer): the plots differ."""
    for name, extra in (
        ("default", []),
        ("l0h1", ["--attention-layer", "0", "--attention-head", "1"]),
    ):
        assert (
            main(
                [
                    "evaluate",
                    str(runs["transformer"]),
                    "--split",
                    "extra",
                    "--beam",
                    "1",
                    "--attention-plots",
                    "1",
                    "--report",
                    str(tmp_path / name),
                    *extra,
                ]
            )
            == 0
        )
    assert (tmp_path / "default" / "attention_1.png").read_bytes() != (
        tmp_path / "l0h1" / "attention_1.png"
    ).read_bytes()


def test_seq2seq_attention_plots_warn_and_write_none(runs, tmp_path, capsys):
    report = tmp_path / "r"
    assert (
        main(
            [
                "evaluate",
                str(runs["seq2seq"]),
                "--split",
                "extra",
                "--beam",
                "1",
                "--attention-plots",
                "2",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    assert "no attention" in capsys.readouterr().err
    assert (report / "scores.json").is_file()
    assert not list(report.glob("attention_*"))


@pytest.mark.parametrize("option", [["--attention-layer", "7"], ["--attention-head", "5"]])
def test_attention_layer_or_head_out_of_range_is_a_one_line_error(runs, tmp_path, capsys, option):
    rc = main(
        [
            "evaluate",
            str(runs["transformer"]),
            "--split",
            "extra",
            "--beam",
            "1",
            "--attention-plots",
            "1",
            "--report",
            str(tmp_path / "r"),
            *option,
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("nmt: error:") and option[0] in err[-1]


# ---------------------------------------------------------------------------------- compare


def test_compare_writes_plot_and_table_with_both_models(reports, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert (
        main(["compare", str(reports["rnnsearch"]), str(reports["transformer"]), "--out", str(out)])
        == 0
    )
    assert is_png(out / "compare.png")
    table = (out / "compare.md").read_text()
    header = table.splitlines()[2]  # under "## BLEU by source length"
    assert "rnnsearch" in header and "transformer" in header and "p (transformer)" in header
    for name in ("rnnsearch", "transformer"):
        bleu = scores_of(reports[name])["buckets"][0]["bleu"]
        assert f"{bleu:.2f}" in table.splitlines()[4]
    assert table in capsys.readouterr().out


def test_evaluate_compare_writes_comparison_beside_new_report(runs, reports, tmp_path):
    report = tmp_path / "seq2seq"
    assert (
        main(
            [
                "evaluate",
                str(runs["seq2seq"]),
                "--split",
                "test",
                "--beam",
                "2",
                "--report",
                str(report),
                "--compare",
                str(reports["transformer"]),
            ]
        )
        == 0
    )
    assert is_png(report / "compare" / "compare.png")
    header = (report / "compare" / "compare.md").read_text().splitlines()[2]
    assert "seq2seq" in header and "transformer" in header


# ---------------------------------------------------------------------------------- translate


def test_translate_stdin_to_stdout_matches_evaluate_and_keeps_blank_lines(runs, corpus, reports):
    srcs = lines(corpus / "test.src")
    # blank lines at the start, between sentences and at the end
    given = ["", *srcs[:10], "", "   ", *srcs[10:], ""]
    proc = run_nmt(
        "translate",
        str(runs["transformer"] / "best.pt"),
        "--beam",
        "2",
        stdin="".join(l + "\n" for l in given),
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.split("\n")
    assert out[-1] == "" and len(out[:-1]) == len(given)
    out = out[:-1]
    assert [o for o, g in zip(out, given) if not g.strip()] == ["", "", "", ""]
    assert [o for o, g in zip(out, given) if g.strip()] == lines(
        reports["transformer"] / "hyps.txt"
    )
    assert not any("\u2581" in o for o in out)  # detokenised: no sentencepiece markers
    assert any(o.strip() for o in out)


def test_translate_input_and_output_files_match_evaluate(runs, corpus, reports, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(l + "\n" for l in lines(corpus / "test.src")))
    dst = tmp_path / "out.txt"
    assert (
        main(["translate", str(runs["transformer"]), "-i", str(src), "-o", str(dst), "--beam", "2"])
        == 0
    )
    assert lines(dst) == lines(reports["transformer"] / "hyps.txt")


def test_translate_nbest_lines_and_sorted_scores(runs, corpus, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(l + "\n" for l in lines(corpus / "extra.src")[:4]))
    dst = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                str(runs["rnnsearch"]),
                "-i",
                str(src),
                "-o",
                str(dst),
                "--nbest",
                "3",
                "--beam",
                "3",
            ]
        )
        == 0
    )
    rows = [l.split(" ||| ") for l in lines(dst)]
    assert len(rows) == 12 and all(len(r) == 3 for r in rows)
    assert [int(r[0]) for r in rows] == [i for i in range(4) for _ in range(3)]
    for i in range(4):
        scores = [float(r[2]) for r in rows[3 * i : 3 * i + 3]]
        assert scores == sorted(scores, reverse=True)
        assert not any("\u2581" in r[1] for r in rows[3 * i : 3 * i + 3])
    # the best of the n-best list is what plain translation with the same beam gives
    assert (
        main(["translate", str(runs["rnnsearch"]), "-i", str(src), "-o", str(dst), "--beam", "3"])
        == 0
    )
    assert lines(dst) == [r[1] for r in rows[::3]]


def test_translate_nbest_above_beam_is_an_error(runs, corpus, capsys):
    assert (
        main(
            [
                "translate",
                str(runs["rnnsearch"]),
                "-i",
                str(corpus / "extra.src"),
                "--nbest",
                "3",
                "--beam",
                "2",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error:") and "--nbest 3" in err and "\n" not in err


def test_translate_nbest_gives_k_lines_for_a_blank_input_too(runs, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("vita le mutol\n\nle dapi luki vita\n")
    dst = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                str(runs["rnnsearch"]),
                "-i",
                str(src),
                "-o",
                str(dst),
                "--nbest",
                "3",
                "--beam",
                "3",
            ]
        )
        == 0
    )
    assert [int(l.split(" ||| ")[0]) for l in lines(dst)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


# ---------------------------------------------------------------------------------- data synth


def test_data_synth_writes_aligned_splits_deterministically(tmp_path, capsys):
    args = ["--train", "50", "--valid", "10", "--test", "20", "--seed", "1"]
    for name in ("a", "b"):
        assert main(["data", "synth", "--out", str(tmp_path / name), *args]) == 0
    assert "train: 50 pairs" in capsys.readouterr().out
    for split, n in (("train", 50), ("valid", 10), ("test", 20)):
        for side in ("src", "tgt"):
            a, b = tmp_path / "a" / f"{split}.{side}", tmp_path / "b" / f"{split}.{side}"
            assert len(lines(a)) == n and all(lines(a))
            assert a.read_bytes() == b.read_bytes()
    assert main(["data", "synth", "--out", str(tmp_path / "c"), *args[:-1], "2"]) == 0
    other_seed = (tmp_path / "c" / "train.src").read_bytes()
    assert other_seed != (tmp_path / "a" / "train.src").read_bytes()


# ---------------------------------------------------------------------------------- study


def write_study(
    path: Path, rnnsearch: dict | None = None, train: dict | None = None, **extra
) -> Path:
    """A study of the tiny seq2seq and rnnsearch (or `rnnsearch`), 10 steps each (or as `train`
    says), scored greedily on 20 test sentences; `extra`: more top-level keys."""
    study = {
        "name": "tiny",
        "base": tiny_config(
            arch=None, data={"synthetic": {"test": 20}}, train={"max_steps": 10, **(train or {})}
        ),
        "models": {
            "seq2seq": {"model": TINY_MODELS["seq2seq"]},
            "rnnsearch": {"model": rnnsearch or TINY_MODELS["rnnsearch"]},
        },
        "evaluate": {"split": "test", "beam": 1},
        **extra,
    }
    return write_yaml(path, study)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    """(study YAML, study directory) after one `nmt study` run of seq2seq and rnnsearch."""
    root = tmp_path_factory.mktemp("study")
    path, out = write_study(root / "study.yaml"), root / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    return path, out


def test_a_study_dry_run_says_what_each_model_would_do_and_writes_nothing(tmp_path, capsys):
    path, out = write_study(tmp_path / "study.yaml"), tmp_path / "out"
    assert main(["study", str(path), "--out", str(out), "--dry-run"]) == 0
    head, *models = capsys.readouterr().out.splitlines()
    assert (
        head
        == f"study {path} -> {out}: 2 model(s), 1 at a time; each scored on split 'test' with beam 1"
    )
    assert [m.split(",")[0] for m in models] == ["  seq2seq: seq2seq", "  rnnsearch: rnnsearch"]
    assert (
        models[0].endswith(f"; trains a new run in {out / 'seq2seq'}") and "10 steps" in models[0]
    )
    assert not out.exists()


def test_a_dry_run_of_a_finished_study_scores_only_and_a_new_budget_retrains(study, capsys):
    path, out = study
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert main(["study", str(path), "--out", str(out), "--dry-run"]) == 0
    plan = capsys.readouterr().out.splitlines()[1:]
    assert len(plan) == 2 and all(m.endswith(": scored only") for m in plan), plan
    assert (
        main(["study", str(path), "--out", str(out), "--dry-run", "--set", "train.max_steps=12"])
        == 0
    )
    plan = capsys.readouterr().out.splitlines()[1:]
    assert all("12 steps" in m and "; trains a new run in" in m for m in plan), plan
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*")) == before


def test_a_study_dry_run_refuses_what_the_study_would_refuse(tmp_path, capsys):
    path = write_study(tmp_path / "study.yaml")
    args = ["study", str(path), "--out", str(tmp_path / "out"), "--dry-run"]
    assert main([*args, "--set", "train.max_stepz=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_stepz" in err and "max_steps" in err, err


def test_study_writes_scores_params_table_plot_and_configs(study):
    _, out = study
    results = json.loads((out / "study.json").read_text())
    assert list(results) == ["seq2seq", "rnnsearch"]
    for name, r in results.items():
        assert {"bleu", "chrf", "signature", "n", "buckets", "params", "train_seconds"} <= set(r)
        assert r["n"] == 20 and r["train_seconds"] > 0
        assert r["params"] == load_checkpoint(out / name / "best.pt")["params"]
        assert r == {
            **scores_of(out / name / "eval_test_beam1"),
            "params": r["params"],
            "steps": 10,
            "stop_reason": "reached max_steps=10",
            "train_seconds": r["train_seconds"],
        }
        assert load_config(out / "configs" / f"{name}.yaml").model.arch == name
    md = (out / "study.md").read_text()
    assert "source words" in md and "| seq2seq |" in md and "| rnnsearch |" in md
    assert re.search(r"^\|\s+1-10\s+\|", md, re.M)
    assert is_png(out / "bleu_by_length.png")


def test_study_rerun_skips_training_and_rewrites_report(study, capsys):
    path, out = study
    results = json.loads((out / "study.json").read_text())
    md = (out / "study.md").read_text()

    def stamps() -> dict[str, int]:
        files = [p for n in results for p in (out / n / "best.pt", *step_checkpoints(out / n))]
        return {str(p): p.stat().st_mtime_ns for p in files}

    before = stamps()
    for name in ("study.md", "study.json", "bleu_by_length.png"):
        (out / name).unlink()
    capsys.readouterr()
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert capsys.readouterr().err.count("skipping training") == 2
    assert stamps() == before
    assert (out / "study.md").read_text() == md
    assert json.loads((out / "study.json").read_text()) == results
    assert is_png(out / "bleu_by_length.png")


def moved_study(old: Path, out: Path, edit=lambda text: text) -> dict[str, int]:
    """Copy a study directory to `out` (its runs' stored configs name the new place, then
    `edit`ed); the modification times of its models' best.pt, to show they stay untouched."""
    shutil.copytree(old, out)
    for name in ("seq2seq", "rnnsearch"):
        stored = out / name / "config.yaml"
        stored.write_text(edit(stored.read_text().replace(str(old), str(out))), encoding="utf-8")
    return {n: (out / n / "best.pt").stat().st_mtime_ns for n in ("seq2seq", "rnnsearch")}


def test_study_rerun_after_nmt_gained_a_key_or_on_other_threads_skips_training(
    study, tmp_path, capsys
):
    # a finished model whose stored config predates a new key (word_dropout) was wiped and
    # retrained; neither a new key at its default nor another thread count changes the model
    path, old = study
    out = tmp_path / "out"
    assert "  word_dropout: 0.0\n" in (old / "seq2seq" / "config.yaml").read_text()
    best = moved_study(old, out, lambda text: text.replace("  word_dropout: 0.0\n", ""))
    capsys.readouterr()
    assert main(["study", str(path), "--out", str(out), "--set", "train.threads=1"]) == 0
    assert capsys.readouterr().err.count("skipping training") == 2
    assert {n: (out / n / "best.pt").stat().st_mtime_ns for n in best} == best


def test_study_rerun_with_other_buckets_rescores_without_retraining(study, tmp_path, capsys):
    # how a study scores (its eval section) is not what it trains: hours of training stay
    path, old = study
    out = tmp_path / "out"
    best = moved_study(old, out)
    capsys.readouterr()
    args = ["--set", "eval.buckets=[5]", "--set", "eval.min_bucket=20"]  # 20 test sentences
    assert main(["study", str(path), "--out", str(out), *args]) == 0
    assert capsys.readouterr().err.count("skipping training") == 2
    assert {n: (out / n / "best.pt").stat().st_mtime_ns for n in best} == best
    for name in best:
        scores = scores_of(out / name / "eval_test_beam1")
        assert scores["bucket_merge"] == {"asked": [5], "min_sentences": 20}
        assert [b["n"] for b in scores["buckets"]] == [20]  # 1-5 and 6+ merged into one
        assert load_config(out / name / "config.yaml", stored=True).eval.buckets == [5]


def test_a_study_model_trains_on_from_its_stored_config_in_another_directory(
    corpus, tmp_path, monkeypatch
):
    # a study's data path is relative to where it ran; its configs/NAME.yaml resumed elsewhere
    # refused the run ("'data' differs") or would read a wrong folder
    path = write_study(tmp_path / "study.yaml")
    study = yaml.safe_load(path.read_text())
    study["base"]["data"] = {
        "source": "local",
        "path": os.path.relpath(corpus, tmp_path),
        "batch_tokens": 400,
    }
    study["models"].pop("rnnsearch")
    path.write_text(yaml.safe_dump(study))
    monkeypatch.chdir(tmp_path)
    assert main(["study", "study.yaml", "--out", "out"]) == 0
    stored = tmp_path / "out" / "configs" / "seq2seq.yaml"
    assert load_config(stored).data.path == str(corpus)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = str(tmp_path / "out" / "seq2seq")
    args = ["--resume", "--set", f"train.run_dir={run}", "--set", "train.max_steps=12"]
    assert main(["train", str(stored), *args]) == 0
    assert step_checkpoints(Path(run))[-1].name == "step_12.pt"


def test_study_rerun_with_changed_model_does_not_report_the_stale_run(study, tmp_path):
    _, old = study
    out = tmp_path / "out"
    shutil.copytree(old, out)
    bigger = tiny_model("rnnsearch", hidden_size=96)
    path = write_study(tmp_path / "study.yaml", rnnsearch=bigger)
    assert main(["study", str(path), "--out", str(out)]) == 0
    trained = load_checkpoint(out / "rnnsearch" / "best.pt")["config"]["model"]
    assert trained["hidden_size"] == 96
    assert load_config(out / "configs" / "rnnsearch.yaml").model.hidden_size == 96
    results = json.loads((out / "study.json").read_text())
    assert (
        results["rnnsearch"]["params"] == load_checkpoint(out / "rnnsearch" / "best.pt")["params"]
    )


def test_a_study_with_several_beams_reports_each_and_trains_once(study, tmp_path, capsys):
    _, out = study
    greedy_md = (out / "study.md").read_text()
    path = write_study(tmp_path / "study.yaml", evaluate={"split": "test", "beam": [1, 2]})
    capsys.readouterr()
    assert main(["study", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("skipping training") == 2 and "(beam 1)" not in err and "(beam 2)" in err
    assert (out / "study.md").read_text() == greedy_md  # the first beam's, as before
    greedy = json.loads((out / "study.json").read_text())
    beam2 = json.loads((out / "study_beam2.json").read_text())
    for name in ("seq2seq", "rnnsearch"):
        assert beam2[name] == {
            **scores_of(out / name / "eval_test_beam2"),
            **{k: greedy[name][k] for k in ("params", "steps", "stop_reason", "train_seconds")},
        }
    assert "(test, beam 2)" in (out / "study_beam2.md").read_text()
    assert is_png(out / "bleu_by_length_beam2.png")


def test_interrupted_study_model_is_resumed_not_reported(tmp_path, monkeypatch, capsys):
    import dataclasses

    import nmt.study as study_mod

    path, out = write_study(tmp_path / "study.yaml"), tmp_path / "out"
    real_train = study_mod.train_job.train

    def ctrl_c(cfg, **kw):  # what a SIGINT during training returns: checkpointed, unfinished
        result = real_train(cfg, **kw)
        return dataclasses.replace(result, interrupted=True, stop_reason="interrupted by SIGINT")

    monkeypatch.setattr(study_mod.train_job, "train", ctrl_c)
    assert main(["study", str(path), "--out", str(out)]) == 2
    assert (
        "study model 'seq2seq': training was interrupted by SIGINT; rerun the study to resume it"
    ) in capsys.readouterr().err
    assert not (out / "seq2seq" / "trained.json").exists()
    assert not (out / "study.json").exists()
    monkeypatch.setattr(study_mod.train_job, "train", real_train)
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert "training seq2seq (resuming)" in capsys.readouterr().err


def test_a_study_killed_after_early_stopping_ends_with_the_same_table(tmp_path, monkeypatch):
    """The study dies after a model stopped early but before it was marked trained (where the
    parent-death SIGTERM may land, during checkpoint averaging): the rerun resumes the run, which
    stays stopped, and prints the same table."""
    import nmt.training.trainer as train_mod

    bleu = {"n": 0}

    def validate(self):  # BLEU rises twice, then falls: patience 2 stops every model at step 8
        bleu["n"] += 1
        return {"loss": 1.0, "ppl": 2.7, "bleu": [20.0, 25.0, 24.0, 23.0][(bleu["n"] - 1) % 4]}

    monkeypatch.setattr(train_mod.Trainer, "validate", validate)
    train = {"max_steps": 40, "valid_every": 2, "patience": 2, "keep_last": 3, "average_last": 3}
    path = write_study(tmp_path / "study.yaml", train=train)
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    table = (out / "study.md").read_text()
    steps = json.loads((out / "study.json").read_text())["seq2seq"]["steps"]
    assert steps == 8
    # the kill: no mark of a finished model, no report
    (out / "seq2seq" / "trained.json").unlink()
    (out / "study.json").unlink()
    assert main(["study", str(path), "--out", str(out)]) == 0
    assert (out / "study.md").read_text() == table
    assert json.loads((out / "study.json").read_text())["seq2seq"]["steps"] == 8


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _wait_until_gone(pid: int, timeout: float = 120) -> None:
    import time

    end = time.time() + timeout
    status = Path(f"/proc/{pid}/status")
    while status.exists() and "\nState:\tZ" not in status.read_text():
        assert time.time() < end, f"process {pid} still runs"
        time.sleep(0.1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_a_parallel_study_killed_with_sigkill_stops_its_workers_and_ends_with_the_same_table(
    tmp_path,
):
    import time

    models = {name: {"model": model} for name, model in TINY_MODELS.items()}
    # every checkpoint is kept and averaged, so a stray one would change the scores
    train = {"max_steps": 80, "valid_every": 10, "keep_last": 20, "average_last": 20}
    # three models, two at a time: the third waits in the pool's queue when the study is killed
    path = write_study(tmp_path / "study.yaml", train=train, parallel=2, models=models)
    unbroken, out = tmp_path / "unbroken", tmp_path / "out"
    assert main(["study", str(path), "--out", str(unbroken)]) == 0

    with open(tmp_path / "killed.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nmt", "study", str(path), "--out", str(out)],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
        try:
            end = time.time() + 120
            while not list(out.glob("*/checkpoints/step_*.pt")):
                assert time.time() < end and proc.poll() is None, "no checkpoint was written"
                time.sleep(0.05)
            workers = _children(proc.pid)
            proc.kill()  # SIGKILL to the study's process only, as a scheduler or `kill -9` does
        finally:
            proc.kill()
            proc.wait()
    assert len(workers) >= 2
    for pid in workers:  # they stopped on their own, took no queued model and exited
        _wait_until_gone(pid)
    assert not list(out.glob("*/trained.json")) and not (out / "transformer").exists()

    assert main(["study", str(path), "--out", str(out)]) == 0
    got = json.loads((out / "study.json").read_text())
    want = json.loads((unbroken / "study.json").read_text())
    assert list(got) == list(want)
    for name in models:
        for run in (got[name], want[name]):  # where and how long it trained may differ
            assert run.pop("checkpoint").endswith(f"{name}/averaged.pt")
            del run["train_seconds"]
        assert got[name] == want[name], name
        assert sorted(p.name for p in (out / name / "checkpoints").iterdir()) == sorted(
            p.name for p in (unbroken / name / "checkpoints").iterdir()
        )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"evaluate": {"split": "dev", "beam": 1}}, "'evaluate.split' .* is 'dev'"),
        ({"evaluate": {"split": "test", "beam": "5"}}, "'evaluate.beam' .* must be an integer"),
        ({"evaluate": {"split": "test", "beam": [1, 1]}}, "'evaluate.beam' .* different"),
        ({"base": ["data", "model"]}, "'base' .* must be a mapping"),
        ({"models": 5}, r"'models' in .*study.yaml must be a mapping of model name .* got int 5"),
        ({"models": ["rnnsearch"]}, r"'models' in .*study.yaml must be a mapping .* got list"),
        ({"models": {}}, r"'models' in .*study.yaml must be a mapping .* got an empty mapping"),
    ],
)
def test_study_mistakes_fail_before_any_training(tmp_path, capsys, change, message):
    path = write_study(tmp_path / "study.yaml", **change)
    assert main(["study", str(path), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error:") and "\n" not in err and re.search(message, err), err
    assert not (tmp_path / "s").exists()


def test_study_file_that_is_not_utf8_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "study.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    assert main(["study", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"nmt: error: study file {path} is not UTF-8") and "\n" not in err


def test_study_unknown_top_level_key_is_a_one_line_error(tmp_path, capsys):
    path = write_study(tmp_path / "study.yaml", epochs=3)
    assert main(["study", str(path), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error:") and "'epochs'" in err and "\n" not in err
    assert not (tmp_path / "s").exists()


def test_parallel_study_trains_side_by_side_to_the_same_results(study, tmp_path):
    _, sequential = study
    path = write_study(tmp_path / "study.yaml", parallel=2)
    out = tmp_path / "out"
    assert main(["study", str(path), "--out", str(out)]) == 0
    got = json.loads((out / "study.json").read_text())
    want = json.loads((sequential / "study.json").read_text())
    assert list(got) == list(want) == ["seq2seq", "rnnsearch"]
    for name in got:  # same seed, data and steps: the same model, whichever process trained it
        assert got[name]["bleu"] == want[name]["bleu"]
        assert got[name]["params"] == want[name]["params"]


def test_parallel_study_stops_at_the_first_failed_model(tmp_path):
    slow = {"model": TINY_MODELS["seq2seq"], "train": {"max_steps": 0, "max_minutes": 10}}
    broken = {
        "model": TINY_MODELS["rnnsearch"],
        "data": {"source": "local", "path": str(tmp_path / "missing")},
    }
    path = write_study(tmp_path / "study.yaml", parallel=2, models={"slow": slow, "broken": broken})
    out = tmp_path / "out"
    # without the early stop this would take the slow model's 10 minutes
    proc = subprocess.run(
        [sys.executable, "-m", "nmt", "study", str(path), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 2
    assert f"study model 'broken': data directory not found: {tmp_path / 'missing'}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "study.json").exists() and not (out / "slow" / "trained.json").exists()


def test_study_models_trains_a_subset_and_a_full_rerun_adds_the_rest(study, tmp_path, capsys):
    _, whole = study
    path, out = write_study(tmp_path / "study.yaml"), tmp_path / "out"
    assert main(["study", str(path), "--out", str(out), "--models", "rnnsearch"]) == 0
    assert list(json.loads((out / "study.json").read_text())) == ["rnnsearch"]
    assert not (out / "seq2seq").exists()
    capsys.readouterr()
    assert main(["study", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "rnnsearch already trained" in err and "training seq2seq (new run)" in err
    got = json.loads((out / "study.json").read_text())
    want = json.loads((whole / "study.json").read_text())
    assert list(got) == ["seq2seq", "rnnsearch"]  # the study's order: seq2seq stays the reference
    for name in got:
        assert got[name]["bleu"] == want[name]["bleu"]


def test_study_models_names_an_unknown_model_before_any_training(tmp_path, capsys):
    path = write_study(tmp_path / "study.yaml")
    assert main(["study", str(path), "--out", str(tmp_path / "s"), "--models", "rnnserch"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no model 'rnnserch'" in err and "did you mean 'rnnsearch'" in err
    assert not (tmp_path / "s").exists()


def test_study_parallel_must_be_a_positive_integer(tmp_path, capsys):
    path = write_study(tmp_path / "study.yaml", parallel=0)
    assert main(["study", str(path), "--out", str(tmp_path / "s")]) == 2
    assert "'parallel'" in capsys.readouterr().err


# ------------------------------------------------------------------ reports and compare (19, 16)


def test_file_based_report_has_its_own_directory_and_records_its_inputs(runs, corpus, capsys):
    run = runs["transformer"]
    assert main(["evaluate", str(run), "--split", "extra", "--beam", "1"]) == 0
    assert (
        main(
            [
                "evaluate",
                str(run),
                "--src",
                str(corpus / "extra.src"),
                "--ref",
                str(corpus / "extra.tgt"),
                "--beam",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    by_split, by_files = (
        scores_of(run / "eval_extra_beam1"),
        scores_of(run / "eval_file_extra_beam1"),
    )
    assert by_split["split"] == "extra" and by_files["split"] is None
    assert by_files["test_set"]["src_file"] == str((corpus / "extra.src").resolve())
    assert by_files["test_set"]["ref_file"] == str((corpus / "extra.tgt").resolve())
    step = load_checkpoint(run / "best.pt")["step"]
    for scores in (by_split, by_files):
        assert scores["checkpoint"] == str(run / "best.pt") and scores["step"] == step
        assert scores["test_set"]["n"] == 7 and scores["test_set"]["src_words"] > 7
    assert by_split["test_set"]["sha256"] == by_files["test_set"]["sha256"]  # the same pairs
    assert out.count(f"checkpoint: {run / 'best.pt'} (step {step})") == 2


def test_compare_run_directories_names_models_after_runs(runs, capsys, tmp_path):
    for arch in ("rnnsearch", "transformer"):
        for beam in ("1", "2"):
            assert main(["evaluate", str(runs[arch]), "--split", "test", "--beam", beam]) == 0
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                str(runs["rnnsearch"]),
                str(runs["transformer"]),
                "--beam",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = (out / "compare.md").read_text()
    header = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    assert header == ["source words", "n", "rnnsearch", "transformer", "p (transformer)"]
    reports = json.loads((out / "compare.json").read_text())["reports"]
    assert reports == {
        "rnnsearch": str(runs["rnnsearch"] / "eval_test_beam1"),
        "transformer": str(runs["transformer"] / "eval_test_beam1"),
    }
    assert is_png(out / "compare.png")


def test_compare_refuses_reports_on_different_test_sets(runs, reports, capsys, tmp_path):
    assert (
        main(
            [
                "evaluate",
                str(runs["transformer"]),
                "--split",
                "extra",
                "--beam",
                "2",
                "--report",
                str(tmp_path / "extra"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "compare",
                str(reports["rnnsearch"]),
                str(tmp_path / "extra"),
                "--out",
                str(tmp_path / "cmp"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(
            "nmt: error: 'extra' (extra, 7 sentences) and 'rnnsearch' (test, 30 "
            "sentences) were scored on different test sets"
        )
        and "\n" not in err
    )
    assert not (tmp_path / "cmp").exists()


def test_evaluate_metrics_ter_adds_ter_with_intervals(runs, tmp_path, capsys):
    report = tmp_path / "r"
    assert (
        main(
            [
                "evaluate",
                str(runs["rnnsearch"]),
                "--split",
                "extra",
                "--beam",
                "1",
                "--metrics",
                "bleu,chrf,ter",
                "--bootstrap",
                "200",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    scores = scores_of(report)
    hyps, refs = lines(report / "hyps.txt"), lines(report / "refs.txt")
    assert scores["ter"] == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score)
    assert scores["bootstrap"]["samples"] == 200 and len(scores["ter_ci"]) == 2
    assert f"TER = {scores['ter']:.2f} [" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["evaluate", str(runs["rnnsearch"]), "--metrics", "bleu,meteor"])
    assert "--metrics: expected metrics from bleu, chrf, ter" in capsys.readouterr().err


def test_study_report_says_per_bucket_whether_attention_beats_the_fixed_vector(study):
    _, out = study
    md = (out / "study.md").read_text()
    assert "## Which models beat seq2seq significantly (BLEU, paired bootstrap)" in md
    verdicts = [l for l in md.splitlines() if l.startswith("- ") and "words (n=" in l]
    assert [v.split(" words")[0] for v in verdicts] == ["- 1-10", "- 11-20"]
    assert all(
        (
            "rnnsearch beats seq2seq significantly" in v
            or "is beaten by" in v
            or "no significant difference" in v
        )
        and "p = " in v
        for v in verdicts
    )
    assert "p (rnnsearch)" in md
