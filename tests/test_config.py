"""Config files: typed loading with defaults, dotted overrides, one-line errors that name the key,
the file and what was expected, the shipped configs, and the generated reference docs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from conftest import REPO, make_config
from nmt import cli
from nmt.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig, VocabConfig
from nmt.config.docs import docs_markdown
from nmt.config.load import check_trainable, load_config
from nmt.errors import NmtError
from nmt.models.rnn_config import RNNSearchConfig

MINIMAL = "data:\n  source: synthetic\nmodel:\n  arch: rnnsearch\n"


@pytest.fixture
def write(tmp_path: Path):
    """Write YAML text to a file and return its path."""

    def _write(text: str, name: str = "cfg.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write


def with_key(section: str, key: str, value: str) -> str:
    """MINIMAL plus the line `section.key: value`."""
    if section in ("data", "model"):
        return MINIMAL.replace(f"{section}:\n", f"{section}:\n  {key}: {value}\n", 1)
    return MINIMAL + f"{section}:\n  {key}: {value}\n"


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(NmtError) as e:
        load_config(path, overrides)
    return str(e.value)


# ----------------------------------------------------------------------------------------------
# Loading and overrides


def test_yaml_loads_into_typed_sections_with_defaults_filled(write):
    cfg = load_config(write(MINIMAL + "  hidden_size: 128\ntrain:\n  lr: 0.001\n"))
    assert isinstance(cfg, Config)
    assert isinstance(cfg.data, DataConfig) and isinstance(cfg.model, ModelConfig)
    assert cfg.data.source == "synthetic" and cfg.model.arch == "rnnsearch"
    assert cfg.model.hidden_size == 128 and cfg.train.lr == 0.001
    # everything not in the file keeps its documented default
    assert cfg.vocab == VocabConfig() and cfg.decode == DecodeConfig()
    assert cfg.model.emb_size == RNNSearchConfig(arch="rnnsearch").emb_size
    assert dataclasses.replace(cfg.train, lr=TrainConfig().lr) == TrainConfig()


def test_integers_widen_to_float_fields(write):
    cfg = load_config(write(MINIMAL + "train:\n  lr: 1\n"))
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)


def test_set_overrides_are_parsed_as_yaml_and_typed(write):
    cfg = load_config(
        write(MINIMAL),
        ["train.lr=0.0005", "model.hidden_size=512", "vocab.joint=false", "train.run_dir=runs/x"],
    )
    assert cfg.train.lr == 0.0005 and isinstance(cfg.train.lr, float)
    assert cfg.model.hidden_size == 512 and isinstance(cfg.model.hidden_size, int)
    assert cfg.vocab.joint is False
    assert cfg.train.run_dir == "runs/x"


def test_nested_override_keeps_the_other_keys_of_its_section(write):
    path = write(
        "data:\n  source: synthetic\n  synthetic: {train: 50, seed: 1}\nmodel:\n  arch: rnnsearch\n"
    )
    cfg = load_config(path, ["data.synthetic.seed=7"])
    assert cfg.data.synthetic.seed == 7 and cfg.data.synthetic.train == 50
    # the section may also be absent from the file
    assert load_config(write(MINIMAL), ["data.synthetic.seed=9"]).data.synthetic.seed == 9


def test_override_wins_over_the_file(write):
    cfg = load_config(write(MINIMAL + "decode:\n  beam: 4\n"), ["decode.beam=2"])
    assert cfg.decode.beam == 2


def test_scientific_notation_is_a_float(write):
    assert load_config(write(MINIMAL + "train:\n  lr: 1e-3\n")).train.lr == 0.001
    assert load_config(write(MINIMAL), ["train.lr=5e-4"]).train.lr == 0.0005


# ----------------------------------------------------------------------------------------------
# Errors: one line naming the key, the place and what was expected


def test_unknown_key_in_file_suggests_the_closest_key(write):
    path = write(MINIMAL + "  hiden_size: 512\n")
    assert error_of(path) == (
        f"unknown key 'model.hiden_size' in {path}; did you mean 'model.hidden_size'?"
    )


def test_unknown_section_is_reported(write):
    path = write(MINIMAL + "trian:\n  lr: 0.1\n")
    assert error_of(path) == f"unknown key 'trian' in {path}; did you mean 'train'?"


def test_unknown_key_in_set_names_set(write):
    msg = error_of(write(MINIMAL), ["train.lrr=0.1"])
    assert msg == "unknown key 'train.lrr' in --set; did you mean 'train.lr'?"


def test_set_without_equals_is_an_error(write):
    assert "KEY=VALUE" in error_of(write(MINIMAL), ["train.lr"])


@pytest.mark.parametrize(
    "section, key, value, expected",
    [
        ("model", "hidden_size", "big", "expected int"),  # string for int
        ("model", "layers", "2.5", "expected int"),  # float for int
        ("vocab", "joint", "1", "expected bool"),  # int for bool
        ("data", "src_lang", "[de, en]", "expected str"),  # list for str
        ("train", "precision", "fp8", "expected auto | fp32 | bf16 | fp16"),
        ("train", "betas", "0.9", "expected list of float"),
    ],
)
def test_wrong_type_names_key_file_and_expected_type(write, section, key, value, expected):
    path = write(with_key(section, key, value))
    msg = error_of(path)
    assert f"'{section}.{key}'" in msg and str(path) in msg and expected in msg
    assert "\n" not in msg


def test_wrong_type_from_set_names_the_key_and_the_overrides(write):
    path = write(MINIMAL)
    msg = error_of(path, ["model.layers=two"])
    assert "'model.layers'" in msg and "expected int" in msg and "--set" in msg


@pytest.mark.parametrize(
    "section, key, value, expected",
    [
        ("eval", "metrics", "[bleu, blue]", "'eval.metrics[1]'"),
        ("train", "early_stop_metric", "chrF", "'train.early_stop_metric'"),
    ],
)
def test_an_unknown_metric_names_the_key_and_suggests_the_closest_of_the_table(
    write, section, key, value, expected
):
    path = write(with_key(section, key, value))
    msg = error_of(path)
    close = "bleu" if "blue" in value else "chrf"
    assert msg.startswith(f"wrong type for {expected} in {path}: expected bleu | chrf | ")
    assert msg.endswith(f"; did you mean '{close}'?") and "\n" not in msg


def test_the_metric_choices_of_the_config_are_the_metric_tables():
    from nmt.config import EvalConfig
    from nmt.config.metrics import METRICS

    (metric,) = typing.get_args(typing.get_type_hints(EvalConfig)["metrics"])
    text = tuple(n for n, row in METRICS.items() if row.from_text)
    assert typing.get_args(metric) == text == ("bleu", "chrf", "ter", "bleu_lc")
    stop = typing.get_args(typing.get_type_hints(TrainConfig)["early_stop_metric"])
    assert stop == tuple(n for n, row in METRICS.items() if row.validation)
    assert stop == ("bleu", "chrf", "loss")


def test_section_that_is_not_a_mapping(write):
    path = write("data:\n  source: synthetic\nmodel: rnnsearch\n")
    msg = error_of(path)
    assert "'model'" in msg and "expected a mapping" in msg and str(path) in msg


@pytest.mark.parametrize(
    "section, key, value, bound",
    [
        ("train", "lr", "-0.001", "expected > 0.0"),
        ("train", "lr", "0", "expected > 0.0"),
        ("decode", "beam", "0", "expected >= 1"),
        ("model", "dropout", "1.5", "expected >= 0.0 and < 1.0"),
        ("vocab", "character_coverage", "0.1", "expected >= 0.5 and <= 1.0"),
    ],
)
def test_out_of_range_names_key_and_bound(write, section, key, value, bound):
    path = write(with_key(section, key, value))
    msg = error_of(path)
    assert f"'{section}.{key}'" in msg and bound in msg and str(path) in msg


@pytest.mark.parametrize(
    "text, key",
    [
        ("data:\n  source: synthetic\nmodel:\n  layers: 2\n", "model.arch"),
        ("data:\n  path: corpus\nmodel:\n  arch: rnnsearch\n", "data.source"),
        ("data:\n  source: synthetic\n", "model"),
        ("data:\n  source: local\nmodel:\n  arch: rnnsearch\n", "data.path"),
        ("data:\n  source: hub\nmodel:\n  arch: rnnsearch\n", "data.hub_name"),
        ("", "data"),
    ],
)
def test_missing_required_key(write, text, key):
    path = write(text)
    msg = error_of(path)
    assert msg.startswith(f"missing required key '{key}' in {path}")


@pytest.mark.parametrize(
    "text, line, column",
    [
        ("data:\n  source: synthetic\nmodel:\n  arch: rnnsearch\n   layers: 2\n", 5, 10),
        ("data: {source: synthetic\nmodel: {arch: rnnsearch}\n", 2, 6),
        ("data:\n  source: synthetic\n\tmodel: {arch: rnnsearch}\n", 3, 1),
    ],
)
def test_yaml_syntax_error_gives_line_and_column(write, text, line, column):
    path = write(text)
    msg = error_of(path)
    assert msg.startswith(f"YAML syntax error in {path} at line {line}, column {column}")
    assert "\n" not in msg


def test_config_that_is_not_a_mapping(write):
    path = write("- data\n- model\n")
    msg = error_of(path)
    assert str(path) in msg and "mapping" in msg and "list" in msg


def test_missing_config_file(tmp_path):
    msg = error_of(tmp_path / "nope.yaml")
    assert "not found" in msg and "nope.yaml" in msg


def test_tied_embeddings_need_a_joint_vocabulary():
    with pytest.raises(NmtError, match=r"tie_embeddings.*vocab\.joint"):
        make_config(
            data={"source": "synthetic"},
            model={"arch": "transformer", "tie_embeddings": True},
            vocab={"joint": False},
        )
    cfg = make_config(
        data={"source": "synthetic"}, model={"arch": "transformer", "tie_embeddings": True}
    )
    assert cfg.model.tie_embeddings and cfg.vocab.joint


def test_nbest_cannot_exceed_beam():
    with pytest.raises(NmtError, match=r"'decode\.nbest' \(5\).*'decode\.beam' \(4\)"):
        make_config(data={"source": "synthetic"}, decode={"beam": 4, "nbest": 5})
    assert (
        make_config(data={"source": "synthetic"}, decode={"beam": 4, "nbest": 4}).decode.nbest == 4
    )


@pytest.mark.parametrize("buckets", [[10, 10, 20], [20, 10], [0, 10]])
def test_length_buckets_must_be_strictly_increasing_positive(write, buckets):
    msg = error_of(write(MINIMAL + f"eval:\n  buckets: {buckets}\n"))
    assert "'eval.buckets'" in msg and "strictly increasing" in msg


def test_plateau_schedule_needs_a_validation_split_to_train(write):
    text = MINIMAL.replace("data:\n", "data:\n  splits: {train: train}\n", 1)
    cfg = load_config(write(text + "train:\n  schedule: plateau\n"))  # loading a run is fine
    with pytest.raises(NmtError, match="'train.schedule: plateau' in cfg.yaml needs a validation"):
        check_trainable(cfg, "cfg.yaml")


# ----------------------------------------------------------------------------------------------
# Through the command line

BAD_CONFIGS = {
    "unknown key": "  hiden_size: 512\n",
    "wrong type": "  layers: two\n",
    "out of range": "  dropout: 1.5\n",
    "syntax": "  arch: [rnnsearch\n",
}


@pytest.mark.parametrize("problem", list(BAD_CONFIGS))
def test_cli_bad_config_is_one_line_exit_2_and_creates_nothing(write, tmp_path, capsys, problem):
    run_dir = tmp_path / "run"
    path = write(MINIMAL + BAD_CONFIGS[problem] + f"train:\n  run_dir: {run_dir}\n")
    assert cli.main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nmt: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not run_dir.exists()


def test_cli_bad_override_is_one_line_exit_2(write, tmp_path, capsys):
    run_dir = tmp_path / "run"
    path = write(MINIMAL + f"train:\n  run_dir: {run_dir}\n")
    assert cli.main(["train", str(path), "--set", "train.lr=-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nmt: error:") and "'train.lr'" in err and err.count("\n") == 1
    assert not run_dir.exists()


@pytest.mark.parametrize("argv", [[], ["train"], ["evaluate"], ["translate"]])
def test_help_prints_usage_and_exits_0(capsys, argv):
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: nmt" + (f" {argv[0]}" if argv else ""))


def test_module_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "nmt", "train", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: nmt train") and "--set" in proc.stdout


# ----------------------------------------------------------------------------------------------
# Shipped configs and reference docs

# corpus*.yaml are shared bases (data, subwords, scoring), whole only through the recipes naming them
SHIPPED = sorted(
    p
    for p in (REPO / "configs").rglob("*.yaml")
    if (REPO / "configs" / "study") not in p.parents and not p.name.startswith("corpus")
)


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.model.arch and cfg.data.source


STUDIES = sorted((REPO / "configs" / "study").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=[p.name for p in STUDIES])
def test_shipped_study_loads_every_model(path, tmp_path):
    from nmt.study import load_study, model_configs

    configs = model_configs(load_study(path), str(path), tmp_path)
    assert configs and all(c.model.arch and c.data.source for c in configs.values())


def test_the_news_study_has_three_architectures_on_step_budgets_and_a_held_out_slice(tmp_path):
    from nmt.study import load_study, model_configs

    path = REPO / "configs" / "study" / "wmt-news.yaml"
    configs = model_configs(load_study(path), str(path), tmp_path)
    assert {c.model.arch for c in configs.values()} == {"seq2seq", "rnnsearch", "transformer"}
    assert {c.train.max_steps for c in configs.values()} == {3600}
    assert all(c.train.max_minutes == 0 for c in configs.values())
    splits = next(iter(configs.values())).data.splits
    assert (splits["train"], splits["valid"], splits["test"]) == (
        "train[1000:]",
        "train[:1000]",
        "valid",
    )


def test_the_europarl_study_asks_bahdanaus_question_on_step_budgets(tmp_path):
    from nmt.study import load_study, model_configs

    path = REPO / "configs" / "study" / "europarl.yaml"
    study = load_study(path)
    configs = model_configs(study, str(path), tmp_path)
    assert {n: c.model.arch for n, c in configs.items()} == {
        "transformer": "transformer",
        "rnnsearch": "rnnsearch",
        "seq2seq": "seq2seq",
        "seq2seq_reversed": "seq2seq",
    }
    # the fixed vector with and without Sutskever's reversal, nothing else apart
    plain, reversed_ = configs["seq2seq"], configs["seq2seq_reversed"]
    assert not plain.model.reverse_source and reversed_.model.reverse_source
    assert dataclasses.replace(reversed_.model, reverse_source=False) == plain.model
    # the same data, subwords and decoding for every model; budgets in steps
    assert len({(repr(c.data), repr(c.vocab), repr(c.decode)) for c in configs.values()}) == 1
    assert all(c.train.max_steps > 0 for c in configs.values())
    assert configs["rnnsearch"].train.max_steps == plain.train.max_steps
    data = plain.data
    assert (data.src_lang, data.tgt_lang, data.splits["test"]) == ("it", "en", "test")
    assert study["evaluate"] == {"split": "test", "beam": [1, 5]}
    assert plain.eval.buckets == [10, 20, 30, 40, 50, 60]


def test_some_configs_are_shipped():
    assert any("toy" in p.parts for p in SHIPPED)


def _keys(cls: type, prefix: str) -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        out.append(prefix + f.name)
        if dataclasses.is_dataclass(tp):
            out.extend(_keys(tp, prefix + f.name + "."))
    return out


def test_docs_are_up_to_date():
    docs = REPO / "docs" / "config.md"
    assert docs.is_file() and docs.read_text(encoding="utf-8") == docs_markdown(), (
        "docs/config.md is out of date; regenerate it with "
        "`python -m nmt.config.docs > docs/config.md`"
    )


def test_docs_list_every_key_of_every_section():
    text = docs_markdown()
    keys = _keys(Config, "")
    assert len(keys) > 50
    sections = [f.name for f in dataclasses.fields(Config)]
    missing = [k for k in keys if f"| `{k}` |" not in text and f"## `{k}`" not in text]
    assert all(f"## `{s}`" in text for s in sections)
    assert not missing, f"keys missing from the config reference: {missing}"


def test_docs_tables_have_four_columns_per_row():
    rows = [line for line in docs_markdown().splitlines() if line.startswith("| `")]
    widths = {line: len(re.split(r"(?<!\\)\|", line)) - 2 for line in rows}
    bad = [line for line, n in widths.items() if n != 4]
    assert not bad, f"{len(bad)} rows do not have 4 cells, e.g. {bad[0]}"


def test_checking_a_config_file_imports_no_torch():
    # Reading and checking configs is the first thing every command does: it may not pay for
    # torch. The shipped architectures' keys live in torch-free nmt/models/*_config.py modules.
    code = (
        "import sys\n"
        "from nmt.config.load import load_config\n"
        "for arch in ('seq2seq', 'rnnsearch', 'transformer'):\n"
        "    assert type(load_config(f'configs/toy/{arch}.yaml').model).arch_name == arch\n"
        "load_config('configs/multi30k/de-en/transformer_local.yaml')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_torch_free_architecture_configs_are_the_registered_ones():
    from nmt.config.load import model_classes
    from nmt.models import config_classes

    shipped = model_classes()
    assert set(shipped) == {"seq2seq", "rnnsearch", "transformer"}
    assert all(config_classes()[arch] is cls for arch, cls in shipped.items())
