"""Lexically constrained beam search: phrases that must appear (positive) or must not (negative),
on every architecture, ensembles and int8, with the unconstrained search left as it was."""

from __future__ import annotations

import importlib.util
import itertools
import random
import re

import pytest
import torch
from torch import Tensor

from conftest import REPO
from nmt.config import DecodeConfig
from nmt.decode import decode_batch, translate_ids
from nmt.errors import NmtError
from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.ensemble import Ensemble
from nmt.search.beam import beam_search
from nmt.search.constraints import Constraints
from nmt.search.excluded_text import PieceText, completing_tokens
from nmt.search.rules import Rules
from nmt.search.sampling import Sampler
from test_decode import (
    ARCHS,
    EOS,
    MarkovModel,
    TinyAttnGRU,
    V,
    make_model,
    pad_batch,
    random_sources,
    real_model,
    teacher_force,
)

# The commit before constraints: its beam search is what the unconstrained path must still be.
BEFORE = "222f24a5fbaf6be892b1ea91f7b13b2dd3941991"


pytestmark = pytest.mark.usefixtures("one_thread")


def occurs(phrase: list[int], tokens: list[int]) -> bool:
    n = len(phrase)
    return any(tokens[i : i + n] == phrase for i in range(len(tokens) - n + 1))


def random_constraints(n: int, seed: int) -> tuple[list, list]:
    """Per sentence 0-3 positive phrases of 1-3 tokens from 4..13 and 0-2 negative phrases of
    1-2 tokens from 14..23 (disjoint, so every positive phrase stays reachable)."""
    rng = random.Random(seed)
    pos = [
        [[rng.randrange(4, 14) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(0, 3))]
        for _ in range(n)
    ]
    neg = [
        [[rng.randrange(14, V) for _ in range(rng.randint(1, 2))] for _ in range(rng.randint(0, 2))]
        for _ in range(n)
    ]
    return pos, neg


def check_outputs(results, pos, neg, model=None, sources=None) -> None:
    """Every hypothesis holds all its positive phrases, none of its negative ones, reports no
    unmet phrase, and (given the model) has the model's score and alignment of its tokens."""
    for i, hyps in enumerate(results):
        assert hyps, f"sentence {i} lost its hypotheses"
        for h in hyps:
            assert h.unmet == 0
            assert all(occurs(p, h.tokens) for p in pos[i]), (i, pos[i], h.tokens)
            assert not any(occurs(p, h.tokens) for p in neg[i]), (i, neg[i], h.tokens)
            if model is not None:  # each keeps its own score and alignment
                score, attn = teacher_force(model, sources[i], h.tokens)
                assert h.score == pytest.approx(score, abs=1e-4)
                if h.attn is not None:
                    assert torch.allclose(h.attn, attn.float(), atol=1e-5)


class ScriptModel(NMTModel):
    """Says its script, one token per step (log-prob ~0), every other token at about -10."""

    def __init__(self, script: list[int]) -> None:
        super().__init__()
        self.script = script

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        return EncoderOut(src.unsqueeze(-1).float(), src_mask)

    def init_state(self, enc: EncoderOut) -> State:
        return State({"rows": enc.mask[:, :1]})

    def decode_step(self, state: State, prev_tokens: Tensor):
        logits = torch.full((prev_tokens.numel(), V), -10.0)
        logits[:, self.script[min(state.step, len(self.script) - 1)]] = 10.0
        return logits.log_softmax(-1), State(state.tensors, state.step + 1), None


# ----------------------------------------------------------------------------------------------
# What the output holds


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("beam", [1, 4])
def test_every_positive_phrase_appears_and_no_negative_one_does(arch, beam):
    model = make_model(arch, seed=30)
    sources = random_sources(12, seed=31)
    pos, neg = random_constraints(12, seed=33)
    assert {len(p) for p in pos} == {0, 1, 2, 3} and {len(x) for ps in pos for x in ps} == {1, 2, 3}
    src, mask = pad_batch(sources)
    cons = Constraints.build(pos, neg)
    cfg = DecodeConfig(alpha=0.6)
    results = decode_batch(
        model, src, mask, cfg, beam=beam, nbest=beam, return_attn=True, constraints=cons
    )
    check_outputs(results, pos, neg, model, sources)
    assert all(len(hyps) == beam for hyps in results)
    assert all((h.attn is None) == (arch == "seq2seq") for hyps in results for h in hyps)


@pytest.mark.parametrize("arch", ARCHS)
def test_sentences_without_constraints_decode_as_if_there_were_none(arch):
    model = make_model(arch, seed=33)
    sources = random_sources(10, seed=34)
    src, mask = pad_batch(sources)
    pos = [[[5, 6]], [], [[7], [8, 9]], [], [], [[10]], [], [], [[11, 12, 13]], []]
    plain = beam_search(model, src, mask, beam=4, nbest=2)
    mixed = beam_search(model, src, mask, beam=4, nbest=2, constraints=Constraints.build(pos))
    for p, a, b in zip(pos, plain, mixed):
        if not p:
            assert [h.tokens for h in b] == [h.tokens for h in a]
            assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-6)
            assert [h.unmet for h in b] == [0, 0] and [h.unmet for h in a] == [None, None]


def test_only_negative_phrases_ban_exactly_their_last_token_in_context():
    model = make_model("transformer", seed=35)
    sources = random_sources(16, seed=36)
    src, mask = pad_batch(sources)
    plain = beam_search(model, src, mask, beam=3)
    # Ban each output's first bigram (the unigram [4] where an output is shorter).
    neg = [[h.tokens[:2]] if len(h.tokens) >= 2 else [[4]] for (h,) in plain]
    results = beam_search(model, src, mask, beam=3, constraints=Constraints.build(None, neg))
    check_outputs(results, [[] for _ in neg], neg, model, sources)
    # The first token of a banned bigram alone is still allowed.
    assert any(h.tokens[:1] == n[0][:1] for (h,), n in zip(results, neg) if len(n[0]) == 2)


def test_a_phrase_counts_once_it_occurs_even_after_a_false_start():
    # The model says 5 5 5 6 then EOS. Phrase [5, 5, 6]: after 5 5 the third 5 interrupts it, yet
    # its last two tokens start it again, so 5 5 5 6 holds it and may end (a search that restarts
    # from nothing would not see it and must add the phrase again).
    model = ScriptModel([5, 5, 5, 6, EOS])
    src, mask = pad_batch([[9, EOS]])
    (hyps,) = beam_search(model, src, mask, beam=4, constraints=Constraints.build([[[5, 5, 6]]]))
    assert hyps[0].tokens == [5, 5, 5, 6] and hyps[0].score == pytest.approx(0.0, abs=1e-3)


def test_a_phrase_is_met_only_as_whole_words_given_the_pieces_that_continue_a_word():
    # The model says 5 6 7: with 6 a piece that continues a word ("construction" + "s"), the
    # phrase [5] met at piece level would be "constructions"; as a whole word the token after
    # it must start a new word, and the output still holds it.
    model = ScriptModel([5, 6, 7, EOS])
    src, mask = pad_batch([[9, EOS]])
    (piece_level,) = beam_search(model, src, mask, beam=3, constraints=Constraints.build([[[5]]]))
    assert piece_level[0].tokens == [5, 6, 7]
    whole = Constraints.build([[[5]]], joiners=[6, 7])
    (hyps,) = beam_search(model, src, mask, beam=3, nbest=3, constraints=whole)
    for h in hyps:
        assert h.unmet == 0 and 5 in h.tokens
        after = h.tokens[h.tokens.index(5) + 1 :]
        assert after[:1] != [6] and after[:1] != [7], h.tokens


def test_once_met_a_phrase_lets_a_later_copy_of_its_word_grow():
    # 5 8 meets [5] as a word; the later 5 6 ("dogs" after "dog") is left as the model says it.
    model = ScriptModel([5, 8, 5, 6, EOS])
    src, mask = pad_batch([[9, EOS]])
    cons = Constraints.build([[[5]]], joiners=[6])
    (hyps,) = beam_search(model, src, mask, beam=3, constraints=cons)
    assert hyps[0].tokens == [5, 8, 5, 6] and hyps[0].unmet == 0


@pytest.mark.parametrize(
    "piece, joins",
    [
        ("s", True),
        ("ing", True),
        ("3", True),
        ("é", True),
        ("\u2581dog", False),
        (".", False),
        ("'s", False),
        ("-", False),
        ("\u2581", False),
        ("中", False),
        ("ก", False),
    ],
)
def test_pieces_that_continue_a_word_start_with_a_letter_of_a_spaced_script(piece, joins):
    from nmt.data.tokenizer import _continues_word

    assert _continues_word(piece) is joins


# Pieces as text for the ScriptModel tests: ids 4.. spell these (the rest spell "x<id>").
SPELLING = {
    4: "\u2581holding",
    5: "\u2581hol",
    6: "ding",
    7: "\u2581t",
    8: "-",
    9: "shirt",
    10: "s",
    11: "\u2581a",
    12: "\u2581shirt",
    13: "\u2581hold",
    14: "ings",
}
PIECES = ["", "", "", ""] + [SPELLING.get(i, f"x{i}") for i in range(4, V)]


def spelled(tokens: list[int]) -> str:
    return "".join(PIECES[i] for i in tokens).replace("\u2581", " ").strip()


@pytest.mark.parametrize(
    "script, kept_out",
    [
        ([11, 5, 6, EOS], "holding"),  # "a holding" spelled with other pieces than its own
        ([7, 8, 9, EOS], "shirt"),  # "t-shirt": a word after a hyphen is a whole word
        ([5, 6, 11, EOS], "holding"),  # at the very start of the output
    ],
)
def test_a_negative_phrase_is_kept_out_as_text_however_the_model_spells_it(script, kept_out):
    model = ScriptModel(script)
    src, mask = pad_batch([[9, EOS]])
    phrase = {"holding": [4], "shirt": [12]}[kept_out]  # the tokenizer's own pieces
    (by_pieces,) = beam_search(
        model, src, mask, beam=3, constraints=Constraints.build(None, [[phrase]])
    )
    assert f" {kept_out} " in f" {spelled(by_pieces[0].tokens).replace('-', ' ')} "
    cons = Constraints.build(None, [[phrase]], pieces=PieceText(PIECES))
    (hyps,) = beam_search(model, src, mask, beam=3, nbest=3, constraints=cons)
    for h in hyps:
        words = re.split(r"[^A-Za-z0-9]+", spelled(h.tokens))
        assert kept_out not in words, spelled(h.tokens)


def test_a_negative_word_does_not_keep_out_a_longer_word_spelled_through_it():
    # "▁hold" "ings" spells "holdings", which holds no word "holding": left as the model says it.
    model = ScriptModel([13, 14, EOS])
    src, mask = pad_batch([[9, EOS]])
    cons = Constraints.build(None, [[[4]]], pieces=PieceText(PIECES))
    (hyps,) = beam_search(model, src, mask, beam=3, constraints=cons)
    assert hyps[0].tokens == [13, 14] and spelled(hyps[0].tokens) == "holdings"


def test_the_tokens_that_would_end_a_phrase_depend_on_the_text_before_them():
    pieces = PieceText(PIECES)
    assert sorted(pieces.ending_word("ding")) == [6]
    assert sorted(completing_tokens(pieces, "\u2581a\u2581hol", False, "holding")) == [4, 6]
    assert completing_tokens(pieces, "\u2581a\u2581hold", False, "holding") == [4]  # no "ing" piece
    assert sorted(completing_tokens(pieces, "\u2581t-", False, "shirt")) == [9, 12]
    assert completing_tokens(pieces, "\u2581short", False, "shirt") == [12]  # only a new word
    assert sorted(completing_tokens(pieces, "", True, "shirt")) == [9, 12]  # the output's start


def test_a_forced_prefix_wins_over_a_negative_phrase():
    model = make_model("rnnsearch", seed=37)
    sources = random_sources(3, seed=38)
    src, mask = pad_batch(sources)
    rules = Rules.build([[7, 8], [7, 8], []])
    cons = Constraints.build([[[9]], [], [[9]]], [[[8]], [[8]], [[8]]])
    results = beam_search(model, src, mask, beam=3, nbest=3, rules=rules, constraints=cons)
    check_outputs(results[2:], [[[9]]], [[[8]]], model, sources[2:])
    for hyps in results[:2]:
        for h in hyps:  # the prefix's 8 stays; no other 8 follows
            assert h.unmet == 0 and h.tokens[:2] == [7, 8] and 8 not in h.tokens[2:]
    assert all(9 in h.tokens for h in results[0])


# ----------------------------------------------------------------------------------------------
# Search quality and the unconstrained path


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_with_constraints_is_exact_search_over_the_outputs_that_satisfy_them(alpha):
    # A random Markov model over {4, 5, 6, EOS}, up to 4 tokens: a beam as wide as the space
    # keeps every hypothesis, so it returns the brute-force best list among the sequences that
    # hold [5, 6] and not [4, 4].
    g = torch.Generator().manual_seed(39)
    probs = {
        prev: dict(zip((4, 5, 6, EOS), torch.rand(4, generator=g).tolist()))
        for prev in (2, 4, 5, 6)
    }
    model = MarkovModel(probs)
    src, mask = pad_batch([[9, EOS]])
    limit = 4
    every = [list(p) for n in range(limit + 1) for p in itertools.product((4, 5, 6), repeat=n)]
    cons = Constraints.build([[[5, 6]]], [[[4, 4]]])
    (hyps,) = beam_search(
        model,
        src,
        mask,
        beam=len(every),
        nbest=5,  # the 6th and 7th tie
        alpha=alpha,
        max_len_a=0,
        max_len_b=limit,
        constraints=cons,
    )
    ok = [toks for toks in every if occurs([5, 6], toks) and not occurs([4, 4], toks)]
    scored = sorted(
        ((teacher_force(model, [9, EOS], toks)[0], toks) for toks in ok),
        key=lambda st: -st[0] / ((5 + len(st[1]) + 1) / 6) ** alpha,
    )
    assert [h.tokens for h in hyps] == [toks for _, toks in scored[:5]]


@pytest.mark.parametrize("arch", ARCHS)
def test_constraints_from_a_reference_cost_model_score_and_nbest_works(arch):
    # Phrases taken from a forced reference (random target sequences) pull the output toward
    # it: it never scores above the unconstrained best (beam search is not exact, so that one
    # gets a wider beam), and each of the n-best holds them.
    model = make_model(arch, seed=40)
    sources = random_sources(10, seed=41)
    src, mask = pad_batch(sources)
    rng = random.Random(42)
    refs = [[rng.randrange(4, V) for _ in range(rng.randint(3, 8))] for _ in sources]
    pos = []
    for ref in refs:
        i, j = sorted(rng.sample(range(len(ref) + 1), 2))
        pos.append([ref[i:j], ref[:1]] if ref[0] not in ref[i:j] else [ref[i:j]])
    free = beam_search(model, src, mask, beam=16, alpha=0.0, early_stop=False)
    held = beam_search(
        model, src, mask, beam=4, nbest=3, alpha=0.0, constraints=Constraints.build(pos)
    )
    check_outputs(held, pos, [[] for _ in pos], model, sources)
    for (a,), b in zip(free, held):
        assert b[0].score <= a.score + 1e-6
        assert len(b) == 3 and len({tuple(h.tokens) for h in b}) == 3
        assert [h.score for h in b] == sorted((h.score for h in b), reverse=True)


@pytest.mark.parametrize("arch", ARCHS)
def test_without_constraints_the_search_is_unchanged(arch):
    path = REPO / "tests" / "fixtures" / "beam_before_constraints.py"  # commit BEFORE's
    spec = importlib.util.spec_from_file_location("beam_before", path)
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    model = make_model(arch, seed=43).float()
    for seed, beam, alpha, early_stop in [
        (44, 1, 0.0, True),
        (45, 3, 0.6, True),
        (46, 5, 1.0, False),
    ]:
        src, mask = pad_batch(random_sources(14, seed=seed))
        rules = Rules.build([[5, 6]] * 3 + [[]] * 11, no_repeat_ngram=2 if beam == 3 else 0)
        kw = dict(beam=beam, nbest=beam, alpha=alpha, early_stop=early_stop, rules=rules)
        old = before.beam_search(model, src, mask, return_attn=True, **kw)
        new = beam_search(model, src, mask, return_attn=True, **kw)
        none = beam_search(model, src, mask, return_attn=True, constraints=None, **kw)
        for a, b, c in zip(old, new, none):
            assert [(h.tokens, h.score, h.norm_score) for h in a] == [
                (h.tokens, h.score, h.norm_score) for h in b
            ]
            assert [(h.tokens, h.score, h.norm_score) for h in c] == [
                (h.tokens, h.score, h.norm_score) for h in b
            ]
            for h, k in zip(a, b):  # byte-identical alignments too
                assert (h.attn is None and k.attn is None) or torch.equal(h.attn, k.attn)
                assert k.unmet is None


# ----------------------------------------------------------------------------------------------
# The length limit, the routing and user mistakes


def test_a_phrase_that_cannot_fit_in_the_length_limit_comes_back_unmet():
    model = make_model("transformer", seed=47)
    src, mask = pad_batch(random_sources(3, seed=48))
    pos = [[[5], [6, 7, 8]], [[9, 10]], []]  # limit 2: [6, 7, 8] cannot fit, [9, 10] can
    results = beam_search(
        model,
        src,
        mask,
        beam=4,
        nbest=4,
        max_len_a=0,
        max_len_b=2,
        constraints=Constraints.build(pos),
    )
    first = results[0]
    assert len(first) == 4  # kept, marked, ranked by the phrases they miss
    assert first[0].unmet == 1 and 5 in first[0].tokens and len(first[0].tokens) <= 2
    assert all(h.unmet >= 1 for h in first)
    assert [h.unmet for h in first] == sorted(h.unmet for h in first)
    assert results[1][0].tokens == [9, 10] and results[1][0].unmet == 0  # all that fits
    assert [h.unmet for h in results[1][1:]] == [1, 1, 1]
    check_outputs(results[2:], pos[2:], [[]])


@pytest.mark.parametrize("arch", ["rnnsearch", "transformer"])
def test_beam_of_one_with_constraints_runs_beam_search_and_skips_the_greedy_floor(arch):
    model = make_model(arch, seed=49)
    sources = random_sources(8, seed=50)
    src, mask = pad_batch(sources)
    pos, neg = random_constraints(8, seed=51)
    cons = Constraints.build(pos, neg)
    cfg = DecodeConfig(greedy_floor=True)
    one = decode_batch(model, src, mask, cfg, beam=1, constraints=cons)
    direct = beam_search(model, src, mask, beam=1, alpha=cfg.alpha, constraints=cons)
    assert [[h.tokens for h in hs] for hs in one] == [[h.tokens for h in hs] for hs in direct]
    check_outputs(one, pos, neg, model, sources)
    check_outputs(decode_batch(model, src, mask, cfg, beam=3, constraints=cons), pos, neg)


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_ids_gives_each_input_line_its_own_constraints(beam):
    model = make_model("transformer", seed=52)
    sources = random_sources(20, seed=53)
    pos, neg = random_constraints(20, seed=54)
    cfg = DecodeConfig(batch_tokens=40, nbest=beam)  # several batches, reordered by length
    results = translate_ids(
        model, sources, cfg, beam=beam, positive_constraints=pos, negative_constraints=neg
    )
    check_outputs(results, pos, neg, model, sources)
    only_pos = translate_ids(model, sources, cfg, beam=beam, positive_constraints=pos)
    check_outputs(only_pos, pos, [[] for _ in pos])


def test_ensembles_and_int8_decode_with_constraints():
    from nmt.models.quantize import quantize_int8

    sources = random_sources(8, seed=55)
    src, mask = pad_batch(sources)
    pos, neg = random_constraints(8, seed=56)
    cons = Constraints.build(pos, neg)
    ensemble = Ensemble([real_model("rnnsearch", 57), real_model("transformer", 58)]).eval()
    results = beam_search(ensemble, src, mask, beam=4, nbest=2, constraints=cons)
    check_outputs(results, pos, neg, ensemble, sources)
    int8 = quantize_int8(real_model("transformer", 59).float())
    check_outputs(beam_search(int8, src, mask, beam=4, nbest=2, constraints=cons), pos, neg)


def test_malformed_phrases_are_one_line_errors():
    # (an excluded phrase inside an included one is refused on text, where users write them:
    # tests/test_constraint_limits.py)
    cases = [
        (lambda: Constraints.build([[], [[]]]), "sentence 1: positive constraint \\[\\] is empty"),
        (lambda: Constraints.build([[[5, EOS]]], None, "cpu", (0, 2, EOS)), "holds id 3"),
        (lambda: Constraints.build([[[5]]], [[], []]), "1 positive and 2 negative"),
    ]
    sources = random_sources(2, seed=60)
    cases += [
        (
            lambda: translate_ids(
                TinyAttnGRU(), sources, DecodeConfig(), positive_constraints=[[]]
            ),
            "1 positive constraint lists for 2 sentences",
        ),
        (
            lambda: translate_ids(
                TinyAttnGRU(), sources, DecodeConfig(), negative_constraints=[[[4]], [[EOS]]]
            ),
            "sentence 1: negative constraint \\[3\\] holds id 3",
        ),
        (
            lambda: decode_batch(
                TinyAttnGRU(),
                *pad_batch(sources),
                DecodeConfig(),
                sampler=Sampler(),
                constraints=Constraints.build([[[5]], []]),
            ),
            "sampling cannot honour them",
        ),
    ]
    for call, message in cases:
        with pytest.raises(NmtError, match=message) as err:
            call()
        assert "\n" not in str(err.value)
