"""The config keys of the two RNN architectures, seq2seq and rnnsearch (torch-free: checking a
config never imports torch; the architectures are `seq2seq.py` and `rnnsearch.py`, beside this
file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmt.config import ModelConfig, opt


@dataclass
class RNNConfig(ModelConfig):
    """Keys both RNN architectures (seq2seq, rnnsearch) have."""

    rnn_type: Literal["gru", "lstm"] = opt("gru", "recurrent cell")
    emb_size: int = opt(256, "embedding size", lo=1)
    hidden_size: int = opt(512, "decoder hidden size (seq2seq: the encoder's too)", lo=1)
    deep_output: Literal["maxout", "tanh", "none"] = opt(
        "maxout", "deep output layer before the softmax"
    )


@dataclass
class Seq2SeqConfig(RNNConfig):
    reverse_source: bool = opt(False, "feed the source reversed (Sutskever et al. 2014)")
    feed_context: bool = opt(
        True,
        "concatenate the context vector c = h_T to the decoder input "
        "and output at every step (Cho et al. 2014)",
    )


@dataclass
class RNNSearchConfig(RNNConfig):
    enc_hidden_size: int = opt(0, "encoder size per direction; 0 = hidden_size // 2", lo=0)
    attention: Literal["bahdanau", "luong_dot", "luong_general"] = opt(
        "bahdanau", "alignment model: additive (Bahdanau) or Luong dot/general"
    )
    attention_size: int = opt(0, "additive attention size; 0 = hidden_size", lo=0)


CONFIGS = {"seq2seq": Seq2SeqConfig, "rnnsearch": RNNSearchConfig}
