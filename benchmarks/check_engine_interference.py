"""Why benchmark_export.py runs each engine in its own process: nmt's speed alone, then after
CTranslate2 ran in the same process (each library brings its own OpenMP thread pool).

    python benchmarks/check_engine_interference.py RUN [--n 1000] [--beam 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nmt.checkpoint import load_model  # noqa: E402
from nmt.data.corpus import load_split  # noqa: E402
from nmt.export.ctranslate2 import (  # noqa: E402
    export_ctranslate2,
    import_ctranslate2,
    output_limit,
    translate_ct2,
)
from nmt.models.onednn import use_onednn_linears  # noqa: E402
from nmt.text_translation import encode_inputs, translate_texts  # noqa: E402


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return round(time.perf_counter() - t, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, model, tok, _ = load_model(a.run)
    use_onednn_linears(model)
    src = load_split(cfg.data, cfg.eval.split)[0][: a.n]
    limit = max(
        output_limit(len(x), cfg.decode)
        for x in encode_inputs(tok, src, cfg.decode.max_input_tokens)
    )
    dec = dataclasses.replace(cfg.decode, max_len_a=0.0, max_len_b=limit)

    def nmt() -> float:
        return timed(lambda: translate_texts(model, tok, src, dec, beam=a.beam))

    nmt()  # warm-up
    print("nmt alone (s):", [nmt() for _ in range(3)])
    path = export_ctranslate2(a.run, Path(tempfile.mkdtemp()) / "ct2", None)
    tr = import_ctranslate2().Translator(
        str(path), device="cpu", inter_threads=1, intra_threads=a.threads
    )
    ct2 = [timed(lambda: translate_ct2(tr, tok, src, dec, beam=a.beam)) for _ in range(3)]
    print("CTranslate2 (s):", ct2)
    print("nmt after CTranslate2 in this process (s):", [nmt() for _ in range(3)])


if __name__ == "__main__":
    main()
