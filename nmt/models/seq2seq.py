"""RNN encoder-decoder without attention (Sutskever et al. 2014; Cho et al. 2014, "RNNenc").

The encoder reads the source into one fixed vector c (the top layer's final hidden state at each
sentence's last real token); the decoder sees the source ONLY through c:

    s_0 = tanh(W_init c)                                   (one slice per layer)
    s_i = RNN([emb(y_{i-1}); c], s_{i-1})                  (feed_context, Cho et al.)
    p(y_i | ...) = softmax(Out([s_i; emb(y_{i-1}); c]))    (Out = deep output, see DeepOutput)

Without feed_context the decoder input is emb(y_{i-1}) and the output layer sees s_i only
(Sutskever et al.). With reverse_source the real source tokens are reversed but a final EOS stays
last, so the encoder still ends on the end-of-sentence marker (pads stay at the end too).
For LSTMs, c and s_0 are hidden states; the decoder's initial memory cell is zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.dropout import Dropout
from nmt.models.registry import register
from nmt.models.rnn import DeepOutput, gates, make_rnn, reversal_index, run_masked, run_rnn
from nmt.models.rnn_config import Seq2SeqConfig


def reverse_tokens(src: Tensor, mask: Tensor, eos_id: int) -> Tensor:
    """Reverse each row's real tokens in place of themselves, keeping a final EOS (and pads) put."""
    lengths = mask.sum(1, keepdim=True)  # [B, 1]
    last = src.gather(1, (lengths - 1).clamp(min=0))
    n = lengths - (last == eos_id).long()  # tokens to reverse
    return src.gather(1, reversal_index(n, src.size(1)))


class Seq2Seq(NMTModel):
    def __init__(self, cfg: Seq2SeqConfig, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        E, H, L = cfg.emb_size, cfg.hidden_size, cfg.layers
        self.rnn_type, self.layers, self.hidden = cfg.rnn_type, L, H
        self.reverse_source, self.feed_context = cfg.reverse_source, cfg.feed_context
        self.src_emb = nn.Embedding(src_vocab, E, padding_idx=self.pad_id)
        self.encoder = make_rnn(cfg.rnn_type, E, H, L, cfg.dropout)
        self.init = nn.Linear(H, L * H)
        self.tgt_emb = nn.Embedding(tgt_vocab, E, padding_idx=self.pad_id)
        ctx = H if cfg.feed_context else 0
        self.decoder = make_rnn(cfg.rnn_type, E + ctx, H, L, cfg.dropout)
        self.out = DeepOutput(
            cfg.deep_output, H + (E + ctx if cfg.feed_context else 0), E, tgt_vocab
        )
        self.drop = Dropout(cfg.dropout)

    # -- encoder ---------------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        if self.reverse_source:
            src = reverse_tokens(src, src_mask, self.eos_id)
        memory, h_n = run_masked(self.encoder, self.drop(self.src_emb(src)), src_mask)
        return EncoderOut(memory, src_mask, final=h_n[-1])  # c: [B, H]

    def init_state(self, enc: EncoderOut) -> State:
        c = enc.final  # the only path from source
        h = torch.tanh(self.init(c)).view(c.size(0), self.layers, self.hidden)
        tensors = {"h": h, "context": c}
        if self.rnn_type == "lstm":
            tensors["cell"] = torch.zeros_like(h)
        return State(tensors)

    # -- decoder ---------------------------------------------------------------------------
    def _decode(self, state: State, tgt_in: Tensor) -> tuple[Tensor, State]:
        """Run the decoder over tgt_in [B, T] from `state`; returns the vocabulary projection's
        input [B, T, F]."""
        y = self.drop(self.tgt_emb(tgt_in))  # [B, T, E]
        c = state["context"].unsqueeze(1).expand(-1, y.size(1), -1)  # [B, T, H]
        x = torch.cat([y, c], -1) if self.feed_context else y
        h0 = state["h"].transpose(0, 1).contiguous()  # [L, B, H] for cuDNN
        if self.rnn_type == "lstm":
            c0 = state["cell"].transpose(0, 1).contiguous()
            s, (h, cell) = run_rnn(self.decoder, x, (h0, c0))
            new = {"cell": cell.transpose(0, 1)}
        else:
            s, h = run_rnn(self.decoder, x, h0)
            new = {}
        feats = torch.cat([self.drop(s), y, c], -1) if self.feed_context else self.drop(s)
        new.update(h=h.transpose(0, 1), context=state["context"])
        return self.out.features(feats), State(new, state.step + tgt_in.size(1))

    def vocab_projection(self) -> nn.Linear:
        return self.out.proj

    def features(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        # The decoder input never depends on its own outputs, so one fused RNN call covers all steps.
        return self._decode(self.init_state(self.encode(src, src_mask)), tgt_in)[0]

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, None]:
        h, state = self._decode(state, prev_tokens.unsqueeze(1))
        return F.log_softmax(self.out.proj(h[:, 0]).float(), dim=-1), state, None

    def matmul_flops_per_token(self, src_len: float, tgt_len: float) -> float:
        E, H, L, G = self.src_emb.embedding_dim, self.hidden, self.layers, gates(self.rnn_type)
        dec_in = self.decoder.input_size
        enc = src_len * sum(2 * G * H * ((E if l == 0 else H) + H) for l in range(L))
        init = 2 * H * L * H
        dec = sum(2 * G * H * ((dec_in if l == 0 else H) + H) for l in range(L)) + self.out.flops()
        return (enc + init) / tgt_len + dec


@register("seq2seq", config=Seq2SeqConfig)
def build_seq2seq(cfg: Seq2SeqConfig, src_vocab: int, tgt_vocab: int) -> NMTModel:
    return Seq2Seq(cfg, src_vocab, tgt_vocab)
