"""The searches, each written once against the NMTModel interface: greedy (and sampling),
beam, and forced decoding for scoring. `nmt.decode` picks one per batch.

PAD and BOS are never generated; `rules.Rules` constrain every search the same way. Lexical
constraints (phrases that must or must not appear, `constraints.Constraints`) are beam search's.
"""
