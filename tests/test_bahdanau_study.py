"""The Bahdanau study (configs/study/europarl_bahdanau.yaml and its GPU twin): the paper's -30 and
-50 models and a Transformer on one subword model, and its report: BLEU by length with interval
bands and the training cap marked, the loss on the reference by length and the seq2seq-minus-
rnnsearch gap. Run on the CPU with tiny models and budgets on a corpus written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SHARED, tiny_model, tiny_pairs
from nmt.study import load_study, model_configs, run_study, study_plan

CPU = REPO / "configs" / "study" / "europarl_bahdanau.yaml"
GPU = REPO / "configs" / "study" / "europarl_bahdanau_gpu.yaml"
NAMES = {"transformer", "rnnsearch-50", "rnnsearch-30", "seq2seq-50", "seq2seq-30"}
pytestmark = pytest.mark.usefixtures("one_thread")


def configs_of(path: Path, tmp_path: Path) -> dict:
    return model_configs(load_study(path), str(path), tmp_path)


@pytest.mark.parametrize("path", [CPU, GPU], ids=["cpu", "gpu"])
def test_the_papers_four_models_and_a_transformer_share_everything_but_the_cap(path, tmp_path):
    configs = configs_of(path, tmp_path)
    assert set(configs) == NAMES
    caps = {n: c.data.train_max_words for n, c in configs.items()}
    assert caps == {n: 30 if n.endswith("-30") else 50 for n in NAMES}
    assert {n: c.model.arch for n, c in configs.items()} == {n: n.split("-")[0] for n in NAMES}
    # one subword model, one test set and one decoding for all five
    assert len({(repr(c.vocab), repr(c.decode), repr(c.eval)) for c in configs.values()}) == 1
    uncapped = {repr(c.data).replace(f"train_max_words={caps[n]}", "") for n, c in configs.items()}
    assert len(uncapped) == 1
    data = configs["seq2seq-30"].data
    assert (data.src_lang, data.tgt_lang, data.splits["test"], data.splits["valid"]) == (
        "it",
        "en",
        "test",
        "valid",
    )


def test_the_cpu_study_trains_for_steps_and_the_gpu_twin_for_epochs_under_8_minutes(tmp_path):
    cpu, gpu = configs_of(CPU, tmp_path / "c"), configs_of(GPU, tmp_path / "g")
    assert all(c.train.max_steps > 0 and c.train.device != "cuda" for c in cpu.values())
    for name, c in gpu.items():
        assert c.train.device == "cuda" and c.train.max_epochs >= 2
        assert 0 < c.train.max_minutes <= 8 and c.train.max_steps == 0
        same = (c.model, c.vocab, c.data.train_max_words, c.eval)
        assert same == (
            cpu[name].model,
            cpu[name].vocab,
            cpu[name].data.train_max_words,
            cpu[name].eval,
        )
    assert (
        load_study(GPU)["evaluate"]
        == load_study(CPU)["evaluate"]
        == {
            "split": "test",
            "beam": [1, 5],
        }
    )


@pytest.mark.parametrize("path", [CPU, GPU], ids=["cpu", "gpu"])
def test_the_study_plans_on_the_shared_europarl(path):
    if not (SHARED / "europarl-it-en" / "train.it").is_file():
        pytest.skip("the shared Europarl corpus is not here")
    plan = study_plan(str(path.relative_to(REPO)), out="/nonexistent/plan-only")
    assert all(f"  {n}: " in plan for n in NAMES)


def long_and_short_corpus(root: Path) -> Path:
    """Line-aligned SPLIT.src / SPLIT.tgt with sentences of 2 to 70 words (tiny_pairs' words)."""
    root.mkdir(parents=True)
    sizes = {"train": (300, 2, 70), "valid": (10, 2, 40), "test": (60, 2, 70)}
    for seed, (split, (n, lo, hi)) in enumerate(sizes.items()):
        pairs = tiny_pairs(n, seed, lo, hi)
        (root / f"{split}.src").write_text("".join(s + "\n" for s, _ in pairs), "utf-8")
        (root / f"{split}.tgt").write_text("".join(t + "\n" for _, t in pairs), "utf-8")
    return root


def tiny_study(path: Path, corpus: Path, tmp_path: Path) -> Path:
    """The study file with its data, sizes and budgets made tiny, and nothing else changed."""
    study = yaml.safe_load(path.read_text())
    base = study["base"]
    base["data"].update(
        path=str(corpus),
        src_lang="src",
        tgt_lang="tgt",
        batch_tokens=600,
        workers=1,
        max_len=200,
        prepared_dir=str(tmp_path / "prepared"),
    )
    base["vocab"] = {"type": "word", "size": 200}
    base["train"].update(max_steps=6, max_epochs=0, max_minutes=0, device="cpu", threads=1)
    base["train"].update(valid_every=1000, valid_max_sentences=5)
    base["eval"]["min_bucket"] = 1
    for model in study["models"].values():
        sizes = tiny_model(model["model"]["arch"])
        kept = {k: v for k, v in model["model"].items() if k not in ("emb_size", "d_model")}
        model["model"] = {
            **{k: v for k, v in kept.items() if "size" not in k and k not in ("ff", "layers")},
            **sizes,
        }
        model["train"] = {
            k: v for k, v in model.get("train", {}).items() if k not in ("max_steps",)
        }
        model["train"]["warmup_steps"] = 0
    study["parallel"], study["out"] = 1, str(tmp_path / "study")
    out = tmp_path / path.name
    out.write_text(yaml.safe_dump(study, sort_keys=False))
    return out


@pytest.fixture(scope="module")
def tiny_bahdanau(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bahdanau")
    corpus = long_and_short_corpus(tmp / "corpus")
    return run_study(str(tiny_study(CPU, corpus, tmp)))


def test_the_capped_models_train_on_short_pairs_from_the_one_shared_corpus(tiny_bahdanau):
    logs = {n: (tiny_bahdanau / n / "train.log").read_text() for n in NAMES}
    assert all("over train_max_words (30)" in logs[n] for n in ("seq2seq-30", "rnnsearch-30"))
    assert all("over train_max_words (50)" in logs[n] for n in NAMES if n.endswith("50"))
    corpora = {
        line for log in logs.values() for line in log.splitlines() if "training corpus:" in line
    }
    assert len({line.split("training corpus: ")[1] for line in corpora}) == 1


def test_the_study_reports_bleu_and_the_loss_by_length_with_the_fixed_vectors_gap(tiny_bahdanau):
    md = (tiny_bahdanau / "study.md").read_text()
    assert "## Loss on the reference by source length" in md
    assert "## The fixed vector's cost: seq2seq's loss minus rnnsearch's" in md
    # each seq2seq against the rnnsearch trained on its data: -30 with -30, -50 with -50
    assert "p (seq2seq-50 - rnnsearch-50)" in md and "p (seq2seq-30 - rnnsearch-30)" in md
    assert "seq2seq-30 - rnnsearch-50" not in md
    assert "reference position" in md and "51+" in md
    gaps = json.loads((tiny_bahdanau / "loss_gaps.json").read_text())
    assert set(gaps) == {"seq2seq-50 - rnnsearch-50", "seq2seq-30 - rnnsearch-30"}
    assert gaps["seq2seq-30 - rnnsearch-30"]["long"]["lo"] == 51
    results = json.loads((tiny_bahdanau / "study.json").read_text())
    assert all(r["loss_by_length"]["tokens"] > 0 for r in results.values())
    # one subword model: the same references cost every model the same number of tokens
    assert len({r["loss_by_length"]["tokens"] for r in results.values()}) == 1
    for suffix in ("", "_beam5"):
        for plot in ("bleu_by_length", "loss_by_length"):
            assert (tiny_bahdanau / f"{plot}{suffix}.png").stat().st_size > 1000


def test_the_study_says_how_long_each_models_output_is_by_source_length(tiny_bahdanau):
    md = (tiny_bahdanau / "study_beam5.md").read_text()
    section = md.split("## Output length against the reference (short output or wrong words?)")
    section = section[1].lstrip().split("\n\n")[0]
    rows = section.splitlines()
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header[2:] == ["seq2seq-50", "seq2seq-30", "transformer", "rnnsearch-50", "rnnsearch-30"]
    labels = [r.strip("|").split("|")[0].strip() for r in rows[2:]]
    assert labels[-2:] == ["51+ pooled", "all"]
    assert all("· BP " in c and "% short" in c for c in rows[-1].strip("|").split("|")[2:])
    results = json.loads((tiny_bahdanau / "study_beam5.json").read_text())
    for r in results.values():
        assert 0 <= r["length"]["bp"] <= 1 and 0 <= r["length"]["short"] <= 1


def test_existing_runs_pair_by_the_cap_they_trained_with_not_the_studys_data(
    tiny_bahdanau, tmp_path
):
    """A study that scores the capped runs (`run: PATH`, e.g. on `valid` for trials) scores them
    on its own data, yet pairs and marks them by what each run trained on."""
    study = yaml.safe_load((tiny_bahdanau.parent / CPU.name).read_text())
    study["base"]["data"].pop("train_max_words")
    study["models"] = {n: {"run": str(tiny_bahdanau / n)} for n in sorted(NAMES - {"transformer"})}
    study.update(out=str(tmp_path / "scored"), evaluate={"split": "valid", "beam": 1})
    path = tmp_path / "scored.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    gaps = json.loads((run_study(str(path)) / "loss_gaps.json").read_text())
    assert set(gaps) == {"seq2seq-50 - rnnsearch-50", "seq2seq-30 - rnnsearch-30"}
