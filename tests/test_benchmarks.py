"""The measurement scripts in benchmarks/ import (and parse their options), so a refactor of
`nmt` that moves a name they use fails here instead of on the day someone re-measures."""

from __future__ import annotations

import ast
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p.stem
    for p in (ROOT / "benchmarks").glob("*.py")
    if p.stem not in ("__init__", "machine", "profile_ops")
)


def test_every_measurement_script_lives_in_benchmarks():
    assert len(SCRIPTS) == 21
    left = {p.name for p in (ROOT / "scripts").glob("*.py")}
    assert left == {"gpu_check.py", "screenshot_serve.py"}


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_with_what_it_uses_from_nmt(name, monkeypatch):
    """Importing runs each script's module-level imports; the `from nmt... import` lines
    inside its functions run only when measuring, so each name they import is looked up."""
    monkeypatch.syspath_prepend(str(ROOT))
    if name == "ct2_client":  # the standalone client needs CTranslate2 itself (the export extra)
        pytest.importorskip("ctranslate2")
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(module.main)
    tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmt"):
            target = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(target, alias.name), f"{name}: {node.module} has no {alias.name}"


def test_machine_record_names_the_cpu(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.machine import machine, write_json

    record = machine()
    assert record["cpu"] and record["cores"] >= 1 and len(record["load"]) == 3
    if shutil.which("lscpu"):  # Zen 4 and Zen 5 are both "AMD EPYC": family and model tell
        assert record["cpu_family"].isdigit() and record["cpu_model_number"].isdigit()
    write_json(tmp_path / "m.json", {"machine": record})
    assert json.loads((tmp_path / "m.json").read_text())["machine"] == record


def test_a_script_runs_as_documented():
    """`python benchmarks/NAME.py --help` from the repository root, as the docs show."""
    out = subprocess.run(
        [sys.executable, "benchmarks/benchmark.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "--translate" in out.stdout, out.stderr


def test_nmt_translate_and_the_ct2_client_are_timed_as_processes_on_the_same_lines(
    tiny_transformer_run, tmp_path, monkeypatch
):
    """The whole-process comparison on a tiny run: every engine timed, outputs compared. (A
    40-step model has near-ties that two engines' summation orders break apart, so the share of
    identical lines is checked loosely here; on the Multi30k recipe it was 300 of 300.)"""
    pytest.importorskip("ctranslate2")
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.benchmark_process import main

    src = tiny_transformer_run.parent / "corpus" / "test.src"
    out = tmp_path / "process.json"
    res = main(
        [
            str(tiny_transformer_run),
            "--src",
            str(src),
            "--n",
            "20",
            "--beams",
            "1,3",
            "--reps",
            "1",
            "--out",
            str(out),
        ]
    )
    assert json.loads(out.read_text()) == res and res["machine"]["cpu"]
    for beam in ("1", "3"):
        row = res["beams"][beam]
        assert all(
            row[e]["sent_s"] > 0 and len(row[e]["seconds"]) == 1 for e in ("nmt fp32", "ct2 fp32")
        )
        assert row["ct2 fp32"]["identical"] >= 0.8
        assert set(row["ratios"]) == {"nmt_fp32/ct2_fp32", "nmt_int8/ct2_int8"}


def test_the_ct2_client_decodes_as_nmts_own_ctranslate2_path(
    tiny_transformer_run, tmp_path, monkeypatch
):
    """The standalone client (no nmt import) and `translate_ct2` give the same lines from the
    same export: same subwords, limits, suppressed tokens and detokenisation."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import ct2_client
    from nmt.checkpoint import load_model
    from nmt.export.ctranslate2 import export_ctranslate2, translate_ct2

    export_ctranslate2(str(tiny_transformer_run), tmp_path / "ct2")
    cfg, _, tok, _ = load_model(str(tiny_transformer_run))
    lines = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()
    lines[3] = ""  # a blank line stays blank
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    info = json.loads((tmp_path / "ct2" / "nmt_export.json").read_text())
    src_sp, tgt_sp = ct2_client.load_tokenizers(tmp_path / "ct2")
    for beam in (1, 3):
        ours = ct2_client.translate(translator, src_sp, tgt_sp, lines, info, beam)
        assert ours == translate_ct2(translator, tok, lines, cfg.decode, beam=beam)
        assert ours[3] == ""


def _recipe(arch: str):
    from nmt.config.load import load_config

    return load_config(ROOT / f"configs/multi30k/de-en/{arch}_local.yaml")


def test_the_joeynmt_peer_trains_the_recipes_sizes_on_the_recipes_files(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.joeynmt_peer import joey_config

    cfg = _recipe("transformer")
    joey = joey_config(cfg, tmp_path / "spm.model", tmp_path / "vocab.txt", tmp_path, 60, 10)
    enc = joey["model"]["encoder"]
    assert (enc["num_layers"], enc["num_heads"], enc["hidden_size"], enc["ff_size"]) == (
        cfg.model.layers,
        cfg.model.heads,
        cfg.model.d_model,
        cfg.model.ff,
    )
    assert enc["layer_norm"] == cfg.model.norm and joey["model"]["tied_softmax"]
    train = joey["training"]
    assert (train["batch_type"], train["batch_size"]) == ("token", cfg.data.batch_tokens)
    assert train["updates"] == 60 and train["validation_freq"] > 60 and not train["use_cuda"]
    assert train["scheduling"] == "warmupinversesquareroot"
    assert joey["data"]["train"] == str(Path(cfg.data.path) / "train")
    assert joey["data"]["src"]["lang"] == "de" and joey["data"]["trg"]["lang"] == "en"
    assert joey["data"]["src"]["tokenizer_cfg"]["model_file"] == str(tmp_path / "spm.model")

    rnn = _recipe("rnnsearch")
    joey = joey_config(rnn, tmp_path / "spm.model", tmp_path / "vocab.txt", tmp_path, 60, 10)
    enc, dec = joey["model"]["encoder"], joey["model"]["decoder"]
    assert enc["bidirectional"] and enc["hidden_size"] == rnn.model.enc_hidden_size
    assert dec["hidden_size"] == rnn.model.hidden_size and dec["attention"] == "bahdanau"
    assert enc["rnn_type"] == dec["rnn_type"] == rnn.model.rnn_type


def test_seq2seq_has_no_joeynmt_peer(monkeypatch):
    """JoeyNMT's RNN decoder always attends: a peer would time a different model."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.joeynmt_peer import has_peer, model_section

    assert has_peer(_recipe("transformer").model) and has_peer(_recipe("rnnsearch").model)
    assert not has_peer(_recipe("seq2seq").model)
    with pytest.raises(SystemExit, match="no peer of arch 'seq2seq'"):
        model_section(_recipe("seq2seq").model)


def test_joeynmt_speed_is_the_median_of_its_logs_after_the_warm_up(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.joeynmt_peer import parse_log

    line = "2026-12-04 - INFO - joeynmt.training - Epoch   1, Step:  {s}, Batch Loss: 9.1, Batch Acc: 0.01, Tokens per Sec: {t}, Lr: 0.0001"
    log = "INFO - joeynmt.model - Total params: 7654321\n" + "\n".join(
        line.format(s=10 * i, t=t) for i, t in enumerate([90, 700, 800, 760], 1)
    )
    got = parse_log(log, skip=1)
    assert got == {"tgt_tok_s": 760, "tgt_tok_s_logs": [90, 700, 800, 760], "params": 7654321}
    with pytest.raises(SystemExit, match="logged 4 speeds, need more than 4"):
        parse_log(log, skip=4)


def test_the_speed_benchmark_writes_one_json_and_a_table(tmp_path, monkeypatch):
    """One training config, one short repetition: the parts it was not asked for are absent."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.speed import main

    out = tmp_path / "speed.json"
    res = main(
        ["--configs", "configs/toy/transformer.yaml", "--steps", "1", "--reps", "1"]
        + ["--out", str(out)]
    )
    assert json.loads(out.read_text()) == res and res["machine"]["cpu"]
    assert {r["precision"] for r in res["training"]} == {"fp32", "bf16"}
    assert "joeynmt" not in res and "process" not in res
    assert "| transformer training fp32, target tok/s |" in res["table"]
    assert "| transformer training fp32, MFU |" in res["table"]
    assert "| transformer training, bf16 / fp32 |" in res["table"]


def test_the_constraints_benchmark_times_both_passes_on_the_same_lines(
    tiny_transformer_run, tmp_path, monkeypatch
):
    """Every pass of each kind is recorded, the ratio is of their medians, and the constrained
    pass says how many of the drawn phrases its translations hold."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.benchmark_constraints import bench
    from nmt.data.constraints_file import draw_constraints

    refs = (tiny_transformer_run.parent / "corpus" / "test.tgt").read_text().splitlines()
    drawn = draw_constraints(refs, seed=1, phrases=(1, 2), words=(1, 1))
    cons = tmp_path / "cons.tsv"
    cons.write_text("".join("\t".join(p) + "\n" for p in drawn))
    res = bench(str(tiny_transformer_run), str(cons), "test", beam=2, repeats=2)
    assert res["sentences"] == len(refs) and res["step"] == 40
    for kind in ("without", "with"):
        assert len(res[kind]["seconds"]) == 2 and 0 <= res[kind]["bleu"] <= 100
    medians = res["with"]["median_seconds"] / res["without"]["median_seconds"]
    assert res["time_ratio"] == round(medians, 3)
    record = res["with"]["constraints"]
    assert record["phrases"] == sum(map(len, drawn)) and record["lines"] == len(refs)
    assert record["met"] == record["phrases"]  # one-word phrases always fit the tiny limit
    assert "constraints" not in res["without"]


def test_the_timed_study_reports_what_each_model_learned(tmp_path, monkeypatch):
    """A faster quick study must keep its lesson: the JSON holds each model's steps, training
    time and BLEU by length beside the wall time."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.speed import quick_study
    from test_cli import write_study

    res = quick_study(tmp_path / "out", str(write_study(tmp_path / "study.yaml")))
    assert res["command"].endswith("study.yaml") and res["seconds"] > 0
    assert set(res["models"]) == {"seq2seq", "rnnsearch"}
    for model in res["models"].values():
        assert model["steps"] == 10 and model["train_seconds"] > 0
        assert model["bleu_by_length"] and all(k[0].isdigit() for k in model["bleu_by_length"])


def test_the_decoding_profile_splits_time_by_phase_layer_and_op(
    tiny_transformer_run, tmp_path, monkeypatch
):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.profile_decode import main

    src = tiny_transformer_run.parent / "corpus" / "test.src"
    out = tmp_path / "decode.json"
    args = ["--src", str(src), "--n", "20", "--beam", "3", "--out", str(out)]
    res = main([str(tiny_transformer_run), *args])
    assert json.loads(out.read_text()) == res and res["sentences"] == 20 and res["beam"] == 3
    assert {"encode", "init_state", "decode_step", "other"} <= set(res["phases"])
    assert {"decoder.0.step", "decoder.1.step", "encoder.0.forward"} <= set(res["layers"])
    assert 0 < res["matmul_share_of_ops"] < 1 and 0 < res["op_share_of_wall"] <= 1
    assert sum(op["share"] for op in res["top_ops"]) <= 1 + 1e-6
    assert not any(op["op"].startswith(("phase:", "layer:")) for op in res["top_ops"])


def test_the_training_profile_splits_a_step_into_forward_backward_and_optimizer(
    tiny_transformer_run, monkeypatch
):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.profile_step import main

    cfg = tiny_transformer_run.parent / "cfg.yaml"
    res = main([str(cfg), "--steps", "2", "--warmup", "1"])
    assert res["model"] == "transformer" and res["steps"] == 2 and res["target_tokens"] > 0
    assert {"features", "backward", "optimizer"} <= set(res["phases"])
    assert {"encoder.0.forward", "decoder.1.forward", "enc_norm.forward"} <= set(res["layers"])
    assert all(0 < p["share_of_wall"] <= 1 for p in res["phases"].values())


def test_profile_labels_leave_the_translations_unchanged(tiny_transformer_run, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.profile_ops import label_model
    from nmt.api import Translator

    lines = (tiny_transformer_run.parent / "corpus" / "test.src").read_text().splitlines()
    translator = Translator.load(tiny_transformer_run, device="cpu")
    before = [r.text for r in translator.translate(lines, beam=3)]
    label_model(translator.model)
    assert [r.text for r in translator.translate(lines, beam=3)] == before


def test_ab_step_writes_a_study_model_as_a_config_the_old_tree_reads(tmp_path, monkeypatch):
    """Only the keys the study file names (none newer than the base commit), the data path
    absolute (the old tree runs in another folder)."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.ab_step import plain_config

    file = plain_config("configs/study/europarl.yaml", "rnnsearch", tmp_path)
    raw = yaml.safe_load(file.read_text("utf-8"))
    assert raw["model"]["arch"] == "rnnsearch" and raw["train"]["max_steps"] == 800
    assert Path(raw["data"]["path"]).is_absolute()
    assert "compile" not in raw["train"] and "train_max_words" not in raw["data"]
    recipe = plain_config("configs/multi30k/de-en/transformer_local.yaml", None, tmp_path)
    assert recipe.is_absolute() and recipe.is_file()


def test_ab_step_ratio_is_of_the_medians_and_keeps_every_run(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.ab_step import KEPT, summary

    def run(tok_s: float) -> dict:
        return {
            **dict.fromkeys(KEPT, 1.0),
            "tgt_tok_s": tok_s,
            "precision_used": "bf16",
            "compile": False,
        }

    out = summary({"old": [run(100), run(300), run(200)], "new": [run(390), run(410), run(10)]})
    assert out["old"]["tgt_tok_s"] == 200 and out["new"]["tgt_tok_s"] == 390
    assert out["ratio_tgt_tok_s"] == pytest.approx(1.95)


def test_ab_step_refuses_a_base_that_is_not_a_commit(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.ab_step import worktree

    with pytest.raises(SystemExit, match="not a commit"):
        worktree("no-such-commit-0000")


def test_fixed_widths_are_the_least_padding_any_choice_of_that_many_gives():
    from itertools import combinations

    from benchmarks.fixed_shapes import best_widths, padded

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 13, size=200)
    top = int(lengths.max())
    brute = min(
        int(padded(lengths, np.array([*w, top])).sum()) for w in combinations(range(1, top), 2)
    )
    widths = best_widths(lengths, 3)
    assert widths.max() == top and len(widths) <= 3
    assert int(padded(lengths, widths).sum()) == brute


def test_fixed_shapes_cover_every_pair_and_pad_no_less_than_the_per_side_bound():
    from benchmarks.fixed_shapes import covering_cost, measure, measure_shapes

    rng = np.random.default_rng(1)
    src = rng.integers(1, 40, size=500)
    tgt = np.clip(src + rng.integers(-5, 6, size=500), 2, None)
    for n in (2, 4):
        shapes = measure_shapes(src, tgt, n)
        assert shapes["shapes"] <= n
        assert np.isfinite(covering_cost(np.array(shapes["source_target_widths"]), src, tgt)).all()
        assert shapes["padding_over_real"] >= measure(src, tgt, n)["padding_over_real"] - 1e-12
    # as many shapes as distinct pairs: nothing is padded
    few_src, few_tgt = np.array([3, 3, 7, 9]), np.array([4, 4, 6, 12])
    assert measure_shapes(few_src, few_tgt, 3)["padding_over_real"] == 0.0


def test_the_same_learning_check_scores_both_runs_steps_and_finds_a_run_the_same_as_itself(
    tiny_transformer_run, tmp_path
):
    from benchmarks.same_learning import main

    steps = sorted(
        int(p.stem.split("_")[1]) for p in (tiny_transformer_run / "checkpoints").glob("step_*.pt")
    )
    run = str(tiny_transformer_run)
    result = main(
        [
            "--old",
            run,
            "--new",
            run,
            "--steps",
            str(steps[-1]),
            "--beam",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    (scored,) = result["steps"]
    assert scored["step"] == steps[-1] and scored["beam"] == 1
    assert scored["new"]["bleu"] == scored["old"]["bleu"] and scored["new_minus_old"] == 0
    assert scored["same"] and scored["paired_p"] is not None
    assert result["train_seconds"]["old"] > 0 and result["machine"]["cpu"]
    assert (tmp_path / "same_learning.png").stat().st_size > 0
    assert json.loads((tmp_path / "same_learning.json").read_text())["steps"] == result["steps"]


def test_the_same_learning_check_names_a_step_the_run_did_not_keep(tiny_transformer_run, tmp_path):
    from benchmarks.same_learning import main

    run = str(tiny_transformer_run)
    with pytest.raises(SystemExit, match="step_7.pt not found .*keep_last"):
        main(["--old", run, "--new", run, "--steps", "7", "--out", str(tmp_path)])


def test_the_same_learning_check_trains_this_trees_recipe_in_both_trees_side_by_side(tmp_path):
    from benchmarks.same_learning import ROOT as SCRIPT_ROOT
    from benchmarks.same_learning import train_commands

    config = Path("configs/multi30k/de-en/transformer_local.yaml")
    cmds = train_commands(tmp_path / "old-tree", config, tmp_path / "out")
    for side, tree in (("old", tmp_path / "old-tree"), ("new", SCRIPT_ROOT)):
        argv, cwd = cmds[side]
        assert cwd == tree  # `python -m nmt` imports the nmt of the folder it runs in
        assert argv[1:5] == ["-m", "nmt", "train", str(config.resolve())]  # one config file
        sets = argv[6::2]
        assert f"train.run_dir={(tmp_path / 'out' / side).resolve()}" in sets
        assert "train.threads=1" in sets and "train.keep_last=10000" in sets


def test_the_same_learning_check_wants_two_runs_or_a_base_and_a_recipe(tmp_path, capsys):
    from benchmarks.same_learning import main

    with pytest.raises(SystemExit):
        main(["--old", str(tmp_path), "--steps", "1", "--out", str(tmp_path)])
    assert "give either --base and --config" in capsys.readouterr().err
