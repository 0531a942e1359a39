"""The Python API: `Translator.load(...).translate(...)` gives `nmt translate`'s text, with n-best,
pieces, alignments and warnings as typed fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmt import Translator
from nmt.api import Hypothesis, Sampling, TranslationResult
from nmt.cli import main
from nmt.errors import NmtError


@pytest.fixture(scope="module")
def translator(tiny_transformer_run: Path) -> Translator:
    return Translator.load(tiny_transformer_run)


@pytest.fixture(scope="module")
def sources(tiny_transformer_run: Path) -> list[str]:
    corpus = tiny_transformer_run.parent / "corpus"
    return (corpus / "test.src").read_text("utf-8").splitlines()[:8]


def cli_translate(run: Path, texts: list[str], tmp_path: Path, *args: str) -> list[str]:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(t + "\n" for t in texts), "utf-8")
    assert main(["translate", str(run), "-i", str(src), "-o", str(out), *args]) == 0
    return out.read_text("utf-8").splitlines()


def test_text_equals_nmt_translate(translator, tiny_transformer_run, sources, tmp_path):
    results = translator.translate(sources)
    assert all(isinstance(r, TranslationResult) for r in results)
    assert [r.text for r in results] == cli_translate(tiny_transformer_run, sources, tmp_path)


def test_beam_and_nbest_equal_nmt_translate(translator, tiny_transformer_run, sources, tmp_path):
    results = translator.translate(sources, beam=3, nbest=2)
    lines = cli_translate(tiny_transformer_run, sources, tmp_path, "--beam", "3", "--nbest", "2")
    ours = [f"{i} ||| {h.text} ||| {h.score:.4f}" for i, r in enumerate(results) for h in r.nbest]
    assert ours == lines
    for r in results:
        assert all(isinstance(h, Hypothesis) for h in r.nbest)
        assert r.text == r.nbest[0].text and r.nbest[0].score >= r.nbest[-1].score


def test_greedy_equals_nmt_translate_beam_1(translator, tiny_transformer_run, sources, tmp_path):
    assert [r.text for r in translator.translate(sources, beam=1)] == cli_translate(
        tiny_transformer_run, sources, tmp_path, "--beam", "1"
    )


def test_alignment_has_a_row_per_target_piece_over_the_source_pieces(translator, sources):
    (r,) = translator.translate(sources[:1], alignment=True)
    assert r.src_pieces[-1] == "</s>" and r.tgt_pieces[-1] == "</s>"
    assert len(r.alignment) == len(r.tgt_pieces)
    assert all(len(row) == len(r.src_pieces) for row in r.alignment)
    assert all(abs(sum(row) - 1) < 1e-2 for row in r.alignment)  # attention weights sum to 1
    assert translator.translate(sources[:1])[0].alignment is None


def test_attention_view_is_per_call_and_leaves_the_model_as_it_was(translator, sources):
    mean = translator.translate(sources[:1], alignment=True)[0].alignment
    head0 = translator.translate(sources[:1], alignment=True, attention_layer=0, attention_head=0)[
        0
    ].alignment
    assert head0 != mean
    assert (translator.model.attn_layer, translator.model.attn_head) == (-1, None)
    assert translator.translate(sources[:1], alignment=True)[0].alignment == mean


def test_overlong_input_is_truncated_with_a_warning_not_dropped(
    translator, tiny_transformer_run, sources, tmp_path
):
    cap = translator.info.max_input_tokens
    long = " ".join([sources[0]] * 10)
    short, trunc = translator.translate([sources[1], long], alignment=True)
    assert short.warnings == []
    assert trunc.warnings and f"truncated to the first {cap}" in trunc.warnings[0]
    assert len(trunc.src_pieces) == cap + 1 and trunc.text
    assert trunc.text == cli_translate(tiny_transformer_run, [long], tmp_path)[0]


def test_blank_input_gives_an_empty_result(translator):
    (r,) = translator.translate(["   "], nbest=2)
    assert r.text == "" and [h.text for h in r.nbest] == ["", ""]
    assert r.tgt_pieces == [] and r.alignment is None


def test_checkpoint_file_loads_like_its_run(translator, tiny_transformer_run, sources):
    other = Translator.load(tiny_transformer_run / "best.pt")
    assert [r.text for r in other.translate(sources)] == [
        r.text for r in translator.translate(sources)
    ]


def test_model_info_describes_the_checkpoint(translator):
    info = translator.info
    assert info.arch == "transformer" and info.parameters == translator.model.num_parameters()
    assert (info.attention_layers, info.attention_heads) == (2, 2)
    assert info.step == 40 and info.valid_bleu is not None
    assert info.src_vocab == translator.tok.src_vocab_size


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam": 2, "nbest": 3}, "nbest 3 needs a beam of at least 3 (beam is 2)"),
        ({"alignment": True, "attention_layer": 5}, "out of range: the model has 2 decoder layer"),
        ({"alignment": True, "attention_head": 2}, "out of range: the model has 2 head"),
    ],
)
def test_bad_options_are_nmt_errors(translator, kwargs, message):
    with pytest.raises(NmtError, match=message.replace("(", r"\(").replace(")", r"\)")):
        translator.translate(["le"], **kwargs)


def test_bad_load_arguments_are_nmt_errors(tmp_path, tiny_transformer_run):
    with pytest.raises(NmtError, match="no such checkpoint"):
        Translator.load(tmp_path / "nothing")
    with pytest.raises(NmtError, match="precision must be one of"):
        Translator.load(tiny_transformer_run, precision="int4")
    with pytest.raises(NmtError, match="fp16 needs a CUDA device"):
        Translator.load(tiny_transformer_run, device="cpu", precision="fp16")


def test_int8_translator_equals_nmt_translate_int8(tiny_transformer_run, sources, tmp_path):
    int8 = Translator.load(tiny_transformer_run, int8=True)
    got = [r.text for r in int8.translate(sources, beam=2)]
    assert got == cli_translate(tiny_transformer_run, sources, tmp_path, "--beam", "2", "--int8")


def test_int8_off_the_cpu_is_refused_before_loading(tmp_path):
    with pytest.raises(NmtError, match="--int8 runs on the CPU only"):
        Translator.load(tmp_path / "no-such-run", device="cuda", int8=True)


# ---------------------------------------------------------------------- one loader with the CLI


@pytest.fixture(scope="module")
def train_sources(tiny_transformer_run: Path) -> list[str]:
    """Training sentences: every word of them is in the word vocabulary."""
    corpus = tiny_transformer_run.parent / "corpus"
    return (corpus / "train.src").read_text("utf-8").splitlines()[:2]


def test_unknown_words_are_named_in_each_results_warnings(translator, train_sources):
    known, odd = train_sources[0], train_sources[1] + " zzyzx qwrtp"
    plain, unknown = translator.translate([known, odd])
    assert plain.warnings == []
    assert unknown.warnings == [
        f"2 of {len(odd.split())} words are not in the model's vocabulary: zzyzx qwrtp"
    ]
    assert "<unk>" in unknown.src_pieces  # a word vocabulary merges the two into one


def test_an_ensemble_loads_as_nmt_translate_loads_it(tiny_transformer_run, sources, tmp_path):
    members = [str(tiny_transformer_run), str(tiny_transformer_run / "best.pt")]
    both = Translator.load(members)
    assert both.meta["ensemble"] == [str(tiny_transformer_run / "best.pt")] * 2
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(t + "\n" for t in sources), "utf-8")
    assert main(["translate", *members, "-i", str(src), "-o", str(out), "--beam", "2"]) == 0
    assert [r.text for r in both.translate(sources, beam=2)] == out.read_text().splitlines()


def test_sampling_draws_what_nmt_translate_sample_draws(
    translator, tiny_transformer_run, sources, tmp_path
):
    """Sampling is not bound by the beam: 4 samples with the checkpoint's beam of 3."""
    results = translator.translate(sources, nbest=4, sampling=Sampling(temperature=1.5, seed=11))
    ours = [f"{i} ||| {h.text} ||| {h.score:.4f}" for i, r in enumerate(results) for h in r.nbest]
    cli = cli_translate(
        tiny_transformer_run,
        sources,
        tmp_path,
        "--sample",
        "--nbest",
        "4",
        "--temperature",
        "1.5",
        "--seed",
        "11",
    )
    assert ours == cli
    assert len({h.text for r in results for h in r.nbest}) > len(results)  # draws, not a search


def test_default_device_and_device_errors_are_the_clis(tiny_transformer_run, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert Translator.load(tiny_transformer_run).device == torch.device("cpu")
    with pytest.raises(NmtError) as api_error:
        Translator.load(tiny_transformer_run, device="cuda")
    assert main(["translate", str(tiny_transformer_run), "--device", "cuda"]) == 2
    assert capsys.readouterr().err == f"nmt: error: {api_error.value}\n"


@pytest.mark.parametrize(
    "texts, message",
    [
        (5, "texts: expected a string or a list of strings, got int"),
        (None, "texts: expected a string or a list of strings, got NoneType"),
        (b"le", "texts: expected a string or a list of strings, got bytes"),
        (["le", 7], "texts[1]: expected a string, got int"),
    ],
)
def test_texts_that_are_not_strings_are_one_error_naming_the_argument(translator, texts, message):
    with pytest.raises(NmtError) as e:
        translator.translate(texts)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "call, message",
    [
        ({"beam": "5"}, "Translator.translate(beam=...): expected an integer or None, got str '5'"),
        ({"nbest": 1.0}, "Translator.translate(nbest=...): expected an integer, got float 1.0"),
        ({"beam": True}, "Translator.translate(beam=...): expected an integer or None, got bool"),
    ],
)
def test_a_beam_or_nbest_that_is_not_an_integer_is_one_error_naming_it(translator, call, message):
    with pytest.raises(NmtError) as e:
        translator.translate(["le"], **call)
    assert str(e.value).startswith(message)


def test_decode_settings_at_load_that_are_not_a_dict_are_one_error_naming_the_argument(
    tiny_transformer_run,
):
    with pytest.raises(NmtError) as e:
        Translator.load(tiny_transformer_run, decode=5)
    assert str(e.value) == (
        "Translator.load(decode=...): expected a dict of decode.* settings (e.g. {'beam': 5}) "
        "or None, got int 5"
    )


def test_a_bad_decode_setting_at_load_names_the_argument_not_the_command_line(
    tiny_transformer_run,
):
    with pytest.raises(NmtError) as e:
        Translator.load(tiny_transformer_run, decode={"language_vocab": -5})
    assert "'decode.language_vocab' in Translator.load(decode=...)" in str(e.value)
    assert "command line" not in str(e.value)


def test_pieces_and_alignment_rows_leave_out_the_forced_language_tag_as_the_cli_does(
    multilingual_runs, tmp_path
):
    from nmt.data.tokenizer import TAG

    run = multilingual_runs["target"]  # the tag is the decoder's forced first token
    t = Translator.load(run)
    r = t.translate("le dog sees", tgt_lang="b", alignment=True)
    assert r.tgt_pieces and not any(TAG.fullmatch(p) for p in r.tgt_pieces), r.tgt_pieces
    assert len(r.alignment) == len(r.tgt_pieces) and r.tgt_pieces[-1] == "</s>"
    src = tmp_path / "in.txt"
    src.write_text("le dog sees\n", "utf-8")
    out = tmp_path / "out.txt"
    argv = ["translate", str(run), "-i", str(src), "-o", str(out), "--tgt-lang", "b"]
    assert main([*argv, "--alignment"]) == 0
    (soft,) = [json.loads(line) for line in Path(f"{out}.align.json").read_text().splitlines()]
    assert soft["tgt"] == r.text.split()  # the CLI's rows are the text's words, no tag
    assert r.text == out.read_text("utf-8").strip()
