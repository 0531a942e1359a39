"""nmt: neural machine translation from YAML configs (seq2seq, RNNsearch, Transformer)."""
__version__ = "0.1.0"
