"""Every registered architecture: shapes, masking, causality, incremental decoding, padding invariance,
the seq2seq bottleneck, beam reordering, trainability, parameter counts and FLOP counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from nmt.config.load import model_config
from nmt.errors import NmtError
from nmt.models import EncoderOut, NMTModel, architectures, build_model
from nmt.models.seq2seq import reverse_tokens

PAD, BOS, EOS = 0, 2, 3
V = 20  # toy vocabulary; real tokens are 4 .. V-1

# The architectures come from the registry, so a new architecture file is tested by every shared
# test below with nothing written here: it runs at its own defaults (add a TINY entry to shrink
# it, a named variant to cover its options, an OVERFIT entry to tune its toy training).
TINY_RNN = dict(emb_size=16, hidden_size=32, dropout=0.1)
TINY = {
    "seq2seq": TINY_RNN,
    "rnnsearch": TINY_RNN,
    "transformer": dict(d_model=32, heads=4, ff=64, dropout=0.1),
}
NAMED_VARIANTS = {
    "seq2seq-gru": ("seq2seq", {}),
    "seq2seq-lstm-2layer-reversed": (
        "seq2seq",
        dict(rnn_type="lstm", layers=2, reverse_source=True),
    ),
    "seq2seq-no-context-feed": ("seq2seq", dict(feed_context=False, deep_output="none")),
    "rnnsearch-bahdanau": ("rnnsearch", {}),
    "rnnsearch-lstm-2layer-tanh": (
        "rnnsearch",
        dict(rnn_type="lstm", layers=2, deep_output="tanh"),
    ),
    "rnnsearch-luong-dot": ("rnnsearch", dict(attention="luong_dot", enc_hidden_size=12)),
    "rnnsearch-luong-general": ("rnnsearch", dict(attention="luong_general", deep_output="none")),
    "transformer-pre": ("transformer", dict(layers=2)),
    "transformer-post-learned": ("transformer", dict(layers=2, norm="post", positions="learned")),
    "transformer-tied-untied-output": ("transformer", dict(tie_embeddings=True, tie_output=False)),
}


def variants(archs: list[str]) -> dict[str, tuple[str, dict]]:
    """name -> (architecture, settings over its TINY sizes): the named variants of `archs`, and
    each architecture that none of them covers under its own name, at its defaults."""
    named = {n: v for n, v in NAMED_VARIANTS.items() if v[0] in archs}
    covered = {arch for arch, _ in named.values()}
    return {**named, **{a: (a, {}) for a in archs if a not in covered}}


VARIANTS = variants(architectures())
OVERFIT = {"seq2seq": (200, 1e-2), "rnnsearch": (150, 1e-2)}  # (steps, lr); else 150, 3e-3
ATTENTION_VARIANTS = [
    "rnnsearch-bahdanau",
    "rnnsearch-luong-dot",
    "rnnsearch-luong-general",
    "transformer-pre",
    "transformer-post-learned",
]


def build(name: str, seed: int = 0, **overrides) -> NMTModel:
    arch, kw = VARIANTS[name]
    torch.manual_seed(seed)
    return build_model(model_config(arch, **{**TINY.get(arch, {}), **kw, **overrides}), V, V).eval()


def sentences(lengths: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Source-style rows: random tokens then EOS (length counts EOS), right-padded."""
    g = torch.Generator().manual_seed(seed)
    x = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        x[i, : n - 1] = torch.randint(4, V, (n - 1,), generator=g)
        x[i, n - 1] = EOS
    return x, x != PAD


def decoder_input(lengths: list[int], seed: int = 2) -> torch.Tensor:
    """[BOS] + tokens, right-padded."""
    y, _ = sentences(lengths, seed)
    return torch.where(y == EOS, PAD, y).roll(1, dims=1).index_fill(1, torch.tensor([0]), BOS)


def teacher_forced(model: NMTModel, src, mask, tgt_in) -> torch.Tensor:
    with torch.no_grad():
        return F.log_softmax(model(src, mask, tgt_in).float(), dim=-1)


def step_by_step(model: NMTModel, src, mask, tgt_in, enc: EncoderOut | None = None):
    """Feed tgt_in one token at a time; returns log-probs [B, T, V] and attention [B, T, S]."""
    with torch.no_grad():
        state = model.init_state(enc if enc is not None else model.encode(src, mask))
        outs, attns = [], []
        for t in range(tgt_in.size(1)):
            log_probs, state, attn = model.decode_step(state, tgt_in[:, t])
            outs.append(log_probs)
            attns.append(attn)
    return torch.stack(outs, 1), None if attns[0] is None else torch.stack(attns, 1)


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_output_shapes_and_distributions(name):
    model = build(name)
    src, mask = sentences([7, 4, 2])
    tgt_in = decoder_input([5, 6, 3])
    assert model(src, mask, tgt_in).shape == (3, 6, V)
    enc = model.encode(src, mask)
    assert enc.memory.shape[:2] == (3, 7) and torch.equal(enc.mask, mask)
    log_probs, state, attn = model.decode_step(model.init_state(enc), tgt_in[:, 0])
    assert log_probs.shape == (3, V) and log_probs.dtype == torch.float32
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3))
    assert state.step == 1
    if VARIANTS[name][0] == "seq2seq":
        assert attn is None
    else:
        assert attn.shape == (3, 7)


@pytest.mark.parametrize("name", ATTENTION_VARIANTS)
def test_attention_never_reaches_padding_and_sums_to_one(name):
    model = build(name)
    src, mask = sentences([7, 4, 2, 5])
    _, attn = step_by_step(model, src, mask, decoder_input([4, 4, 4, 4]))  # [B, T, S]
    assert torch.all(attn[~mask.unsqueeze(1).expand_as(attn)] == 0)
    torch.testing.assert_close(attn.sum(-1), torch.ones(4, 4))
    assert torch.all(attn[mask.unsqueeze(1).expand_as(attn)] > 0)


def test_transformer_reports_chosen_layer_and_head():
    model = build("transformer-pre")
    src, mask = sentences([6, 3])
    tgt_in = decoder_input([3, 3])
    mean_last = step_by_step(model, src, mask, tgt_in)[1]  # defaults: last layer, mean
    heads = []
    for h in range(4):
        model.attn_head = h
        heads.append(step_by_step(model, src, mask, tgt_in)[1])
    torch.testing.assert_close(torch.stack(heads).mean(0), mean_last)
    assert not torch.allclose(heads[0], heads[1])
    model.attn_head, model.attn_layer = None, 0
    first = step_by_step(model, src, mask, tgt_in)[1]
    assert not torch.allclose(first, mean_last)
    assert torch.all(first[1, :, 3:] == 0)


@pytest.mark.parametrize("name", VARIANTS)
def test_content_of_padded_positions_is_ignored(name):
    model = build(name)
    src, mask = sentences([7, 3])
    tgt_in = decoder_input([4, 4])
    noisy = src.masked_fill(~mask, 9)  # garbage ids where mask is False
    torch.testing.assert_close(
        teacher_forced(model, noisy, mask, tgt_in), teacher_forced(model, src, mask, tgt_in)
    )


@pytest.mark.parametrize("name", ["transformer-pre", "transformer-post-learned"])
def test_transformer_is_causal(name):
    model = build(name)
    src, mask = sentences([6, 4])
    tgt_in = decoder_input([7, 7])
    before = teacher_forced(model, src, mask, tgt_in)
    for t in range(1, 7):
        changed = tgt_in.clone()
        changed[:, t] = 4 + (changed[:, t] - 3) % (V - 4)  # a different real token
        after = teacher_forced(model, src, mask, changed)
        torch.testing.assert_close(after[:, :t], before[:, :t])
        assert not torch.allclose(after[:, t:], before[:, t:])


@pytest.mark.parametrize("name", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing(name):
    model = build(name)
    src, mask = sentences([8, 5, 2])
    tgt_in = decoder_input([7, 4, 6])
    incremental, _ = step_by_step(model, src, mask, tgt_in)
    torch.testing.assert_close(
        incremental, teacher_forced(model, src, mask, tgt_in), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("name", VARIANTS)
def test_padding_in_the_batch_changes_nothing(name):
    model = build(name)
    src, mask = sentences([4, 9, 7])
    tgt_in = decoder_input([3, 8, 6])
    alone_src, alone_mask, alone_tgt = src[:1, :4], mask[:1, :4], tgt_in[:1, :3]
    with torch.no_grad():
        batched_enc = model.encode(src, mask).memory[:1, :4]
        alone_enc = model.encode(alone_src, alone_mask).memory
    torch.testing.assert_close(batched_enc, alone_enc, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        teacher_forced(model, src, mask, tgt_in)[:1, :3],
        teacher_forced(model, alone_src, alone_mask, alone_tgt),
        atol=1e-5,
        rtol=0,
    )


@pytest.mark.parametrize("name", ["rnnsearch-bahdanau", "transformer-pre"])
def test_all_pad_source_row_stays_finite(name):
    model = build(name)
    src, mask = sentences([5, 3])
    src[1], mask[1] = PAD, False
    log_probs, attn = step_by_step(model, src, mask, decoder_input([3, 3]))
    assert torch.isfinite(log_probs).all() and torch.isfinite(attn).all()
    assert torch.isfinite(model(src, mask, decoder_input([3, 3]))).all()


def test_reverse_source_reverses_real_tokens_and_keeps_eos_and_pads_in_place():
    src = torch.tensor([[5, 6, 7, EOS, PAD], [8, 9, EOS, PAD, PAD], [4, 5, 6, 7, 8]])
    reversed_ = reverse_tokens(src, src != PAD, EOS)
    assert reversed_.tolist() == [[7, 6, 5, EOS, PAD], [9, 8, EOS, PAD, PAD], [8, 7, 6, 5, 4]]


def _perturb_all_but_final(enc: EncoderOut) -> EncoderOut:
    """Add noise to every encoder state except each sentence's last real one."""
    last = enc.mask.sum(1) - 1
    keep = torch.arange(enc.mask.size(1)).unsqueeze(0) == last.unsqueeze(1)
    noise = torch.randn(enc.memory.shape, generator=torch.Generator().manual_seed(5))
    return EncoderOut(enc.memory + noise * ~keep.unsqueeze(-1), enc.mask, enc.final)


@pytest.mark.parametrize(
    "name", ["seq2seq-gru", "seq2seq-lstm-2layer-reversed", "rnnsearch-bahdanau"]
)
def test_only_rnnsearch_looks_past_the_final_encoder_state(name):
    model = build(name)
    src, mask = sentences([6, 4])
    tgt_in = decoder_input([5, 5])
    with torch.no_grad():
        enc = model.encode(src, mask)
    clean, _ = step_by_step(model, src, mask, tgt_in, enc)
    perturbed, _ = step_by_step(model, src, mask, tgt_in, _perturb_all_but_final(enc))
    if VARIANTS[name][0] == "seq2seq":
        torch.testing.assert_close(perturbed, clean, atol=0, rtol=0)
        # ... while the final state itself does matter (so the check above is not vacuous).
        changed = EncoderOut(enc.memory, enc.mask, enc.final + 1.0)
        assert not torch.allclose(step_by_step(model, src, mask, tgt_in, changed)[0], clean)
    else:
        assert (perturbed - clean).abs().max() > 1e-3


@pytest.mark.parametrize(
    "name", ["seq2seq-lstm-2layer-reversed", "rnnsearch-lstm-2layer-tanh", "transformer-pre"]
)
def test_state_select_reorders_rows(name):
    model = build(name)
    src, mask = sentences([6, 3, 5])
    tgt_in = decoder_input([4, 4, 4])
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        state = model.init_state(model.encode(src, mask))
        for t in range(2):
            _, state, _ = model.decode_step(state, tgt_in[:, t])
        full = model.decode_step(state, tgt_in[:, 2])
        picked = model.decode_step(state.select(index), tgt_in[index, 2])
        torch.testing.assert_close(picked[0], full[0][index])
        if full[2] is not None:
            torch.testing.assert_close(picked[2], full[2][index])
        # The selected state keeps decoding in step with the selected rows.
        after_full = model.decode_step(full[1], tgt_in[:, 3])[0]
        after_picked = model.decode_step(picked[1], tgt_in[index, 3])[0]
        torch.testing.assert_close(after_picked, after_full[index])


def test_transformer_cache_grows_past_its_first_capacity():
    """decode_step writes keys/values into preallocated buffers and doubles them when full: a
    target longer than the first capacity still decodes as teacher forcing does, and the
    cache equals the one torch.cat built before (k, v of every position, in order)."""
    from nmt.models.transformer import FIRST_CAPACITY

    model = build("transformer-pre")
    T = 2 * FIRST_CAPACITY + 5
    src, mask = sentences([6, 3])
    tgt_in = decoder_input([T, T - 7])
    incremental, _ = step_by_step(model, src, mask, tgt_in)
    torch.testing.assert_close(
        incremental, teacher_forced(model, src, mask, tgt_in), atol=1e-5, rtol=1e-4
    )
    with torch.no_grad():
        state = model.init_state(model.encode(src, mask))
        for t in range(T):
            _, state, _ = model.decode_step(state, tgt_in[:, t])
        layer = model.decoder[0]
        x = model.embed(model.tgt_emb, tgt_in)
        k, v = layer.self_attn.project_kv(layer.inp(x, layer.norm1))  # [B, heads, T, dh]
    assert state["self_k"][0].size(2) >= T
    torch.testing.assert_close(state["self_k"][0][:, :, :T], k)
    torch.testing.assert_close(state["self_v"][0][:, :, :T], v)


def test_transformer_decodes_twice_from_one_state_alike():
    """The caches are written in place, but a second decode_step from the same state (another
    token) must neither see nor clobber the first one's position."""
    model = build("transformer-pre")
    src, mask = sentences([6, 3])
    tgt_in = decoder_input([5, 5])
    other = torch.tensor([7, 8])
    with torch.no_grad():
        state = model.init_state(model.encode(src, mask))
        for t in range(2):
            _, state, _ = model.decode_step(state, tgt_in[:, t])
        a = model.decode_step(state, tgt_in[:, 2])
        b = model.decode_step(state, other)
        a2 = model.decode_step(state, tgt_in[:, 2])
        torch.testing.assert_close(a[0], a2[0], rtol=0, atol=0)
        after_a = model.decode_step(a[1], tgt_in[:, 3])[0]
        after_b = model.decode_step(b[1], tgt_in[:, 3])[0]
    torch.testing.assert_close(after_a, step_by_step(model, src, mask, tgt_in[:, :4])[0][:, 3])
    assert not torch.allclose(after_a, after_b)


def test_transformer_beam_reorder_equals_select():
    """reorder (beam search's per-step select: rows move only between the beams of one
    sentence) leaves the cross-attention tensors alone and gathers the caches into spare
    buffers; decoding on from it equals decoding on from select, step after step."""
    model = build("transformer-pre")
    K = 3
    src, mask = sentences([6, 3])
    src, mask = src.repeat_interleave(K, 0), mask.repeat_interleave(K, 0)  # 2 sentences x 3
    tgt_in = decoder_input([6] * 2 * K, seed=5)
    with torch.no_grad():
        state = model.init_state(model.encode(src, mask))
        sel = state
        for t in range(5):
            lp_r, state, attn_r = model.decode_step(state, tgt_in[:, t])
            lp_s, sel, attn_s = model.decode_step(sel, tgt_in[:, t])
            torch.testing.assert_close(lp_r, lp_s, rtol=0, atol=0)
            torch.testing.assert_close(attn_r, attn_s, rtol=0, atol=0)
            g = torch.Generator().manual_seed(t)
            index = torch.cat([torch.randint(0, K, (K,), generator=g) + i * K for i in range(2)])
            state, sel = state.reorder(index), sel.select(index)
            tgt_in = tgt_in[index]
        assert "spare_k" in state.tensors and "spare_k" not in sel.tensors


def test_transformer_beams_share_cross_attention_and_decode_like_copies():
    """expand_beams keeps the source keys, values and bias once per sentence (group K) while a
    plain select copies them for every beam; both decode the same, through reorders and a
    select of whole sentences (beam search dropping a finished one)."""
    model = build("transformer-pre")
    K = 3
    src, mask = sentences([6, 3, 5])
    tgt_in = decoder_input([7] * 3 * K, seed=5)
    with torch.no_grad():
        start = model.init_state(model.encode(src, mask))
        shared = start.expand_beams(K)
        copies = start.select(torch.arange(3).repeat_interleave(K))
        assert shared["cross_k"][0].size(0) == 3 and copies["cross_k"][0].size(0) == 3 * K
        for t in range(6):
            lp_g, shared, attn_g = model.decode_step(shared, tgt_in[:, t])
            lp_c, copies, attn_c = model.decode_step(copies, tgt_in[:, t])
            torch.testing.assert_close(lp_g, lp_c, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(attn_g, attn_c, rtol=1e-5, atol=1e-5)
            if t == 3:  # sentence 1 is done: keep the beams of sentences 0 and 2
                index = torch.cat([torch.arange(K), torch.arange(K) + 2 * K])
                shared, copies = shared.select(index), copies.select(index)
            else:
                g = torch.Generator().manual_seed(t)
                n = len(tgt_in) // K
                index = torch.cat(
                    [torch.randint(0, K, (K,), generator=g) + i * K for i in range(n)]
                )
                shared, copies = shared.reorder(index), copies.reorder(index)
            tgt_in = tgt_in[index]
        assert shared["cross_k"][0].size(0) == 2 and shared["group"] == K


@pytest.mark.parametrize("arch", architectures())
def test_overfits_a_toy_set(arch):
    steps, lr = OVERFIT.get(arch, (150, 3e-3))
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 8, (20,), generator=g).tolist()
    src, mask = sentences(lengths, seed=3)
    tgt_lengths = torch.randint(3, 8, (20,), generator=g).tolist()
    tgt_in = decoder_input(tgt_lengths, seed=4)
    tgt_out, _ = sentences(tgt_lengths, seed=4)  # tokens + [EOS]: tgt_in shifted
    model = build_model(model_config(arch, **{**TINY.get(arch, {}), "dropout": 0.0}), V, V)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    first = None
    for _ in range(steps):
        loss = F.cross_entropy(
            model(src, mask, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD
        )
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 2.0 and loss.item() < 0.05, (first, loss.item())


def test_parameter_counts():
    Vs = Vt = V
    E, H, L = 16, 32, 1
    # seq2seq, GRU, feed_context, maxout output of E units:

    def gru(i: int, h: int) -> int:
        return 3 * h * (i + h) + 2 * 3 * h  # W_ih, W_hh, b_ih, b_hh

    seq2seq = (
        Vs * E
        + gru(E, H)  # source embedding + encoder
        + H * L * H
        + L * H  # s_0 = tanh(W c)
        + Vt * E
        + gru(E + H, H)  # target embedding + decoder
        + (H + E + H) * 2 * E
        + 2 * E  # maxout over [s; y; c]
        + E * Vt
        + Vt
    )  # vocabulary projection
    assert build("seq2seq-gru").num_parameters() == seq2seq == 17300
    # rnnsearch, GRU, encoder E_h = H/2 per direction, additive attention of size A = H:
    Eh, A = H // 2, H
    rnnsearch = (
        Vs * E
        + 2 * gru(E, Eh)  # bidirectional encoder
        + Eh * H
        + H  # s_0 = tanh(W_s h_1^bwd)
        + H * A
        + (2 * Eh * A + A)
        + A  # W, U (+bias), v
        + Vt * E
        + (E * 3 * H + 3 * H)
        + 2 * Eh * 3 * H
        + (H * 3 * H + 3 * H)  # cell
        + (H + E + 2 * Eh) * 2 * E
        + 2 * E
        + E * Vt
        + Vt
    )  # output
    assert build("rnnsearch-bahdanau").num_parameters() == rnnsearch
    # transformer, d=32, ff=64, 2+2 layers, pre-norm, sinusoidal, output tied to target emb:
    d, ff, L = 32, 64, 2
    attn, ffn, ln = 4 * (d * d + d), d * ff + ff + ff * d + d, 2 * d
    transformer = (
        Vs * d
        + Vt * d  # embeddings (output projection tied)
        + L * (attn + ffn + 2 * ln)  # encoder layers
        + L * (2 * attn + ffn + 3 * ln)  # decoder layers
        + 2 * ln
    )  # final encoder / decoder norms
    assert build("transformer-pre").num_parameters() == transformer == 44160


# nn.LSTM runs as one opaque kernel the counter cannot see into, so LSTM variants are left out.
@pytest.mark.parametrize("name", [n for n, (_, kw) in VARIANTS.items() if "rnn_type" not in kw])
def test_matmul_flops_match_a_flop_counter(name):
    model = build(name)
    src, tgt_in = sentences([9, 9, 9])[0], decoder_input([7, 7, 7])
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(src, src != PAD, tgt_in)
    measured = counter.get_total_flops() / tgt_in.numel()
    assert model.matmul_flops_per_token(9, 7) == pytest.approx(measured, rel=1e-6)


def test_every_registered_architecture_is_among_the_tested_variants():
    assert {arch for arch, _ in VARIANTS.values()} == set(architectures())
    assert len(architectures()) >= 3
    # a new architecture file gets the shared tests at its defaults, the others keep theirs
    new = variants(["seq2seq", "conv"])
    assert new["conv"] == ("conv", {}) and "seq2seq-gru" in new and "transformer-pre" not in new


def test_unknown_architecture_is_a_user_error():
    with pytest.raises(NmtError, match="unknown architecture 'model.arch: lstm-lm'"):
        model_config("lstm-lm")


def test_tied_embeddings_need_one_vocabulary():
    with pytest.raises(NmtError, match="tie_embeddings"):
        build_model(model_config("transformer", tie_embeddings=True), 30, 40)
    model = build("transformer-tied-untied-output")
    assert model.src_emb.weight is model.tgt_emb.weight
    assert model.out.weight is not model.tgt_emb.weight
    tied_output = build("transformer-pre")
    assert tied_output.out.weight is tied_output.tgt_emb.weight
