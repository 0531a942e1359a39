"""What a newcomer touches first, run as they would run it: unknown words in translate and
evaluate, training logs beside the progress bar, a mistyped architecture, interactive translate,
`data synth`, `--version`, n-best output for blank lines and an interrupted `nmt train`.

One tiny rnnsearch is trained once per module on a small built-in corpus; terminals are real
pseudo-terminals (pty), so prompts, line editing and progress bars behave as they do for a user.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

import nmt
from nmt.checkpoint import step_checkpoints
from nmt.cli import main
from nmt.config.load import load_config
from nmt.data.corpus import load_split

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "configs" / "toy" / "rnnsearch.yaml"
# the toy config on a smaller corpus and model, so that each training takes seconds
SMALL = [
    "data.synthetic.train=300",
    "data.synthetic.valid=10",
    "data.synthetic.test=10",
    "data.synthetic.lexicon=30",
    "data.synthetic.max_words=12",
    "model.hidden_size=32",
    "model.emb_size=32",
    "model.enc_hidden_size=16",
    "train.valid_every=100000",
    "train.threads=1",
    "train.progress=false",
]
RECORD = re.compile(r"\d\d:\d\d:\d\d (INFO|WARNING) ")


def sets(*overrides: str) -> list[str]:
    return [a for kv in overrides for a in ("--set", kv)]


def nmt_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmt", *args]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TERM": "xterm"}


def run_nmt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        nmt_cmd(*args),
        cwd=ROOT,
        env=env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_in_terminal(
    args: list[str], typed: list[str], streams: tuple[str, ...], timeout: float = 300
) -> tuple[int, str]:
    """Run `nmt ARGS` with the named streams on a pseudo-terminal, type each of `typed` after
    the previous output settles, and return (exit code, everything the terminal showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a real size
    std = {
        name: slave if name in streams else subprocess.PIPE
        for name in ("stdin", "stdout", "stderr")
    }
    proc = subprocess.Popen(nmt_cmd(*args), cwd=ROOT, env=env(), **std)
    os.close(slave)
    shown, pending, end = b"", list(typed), time.time() + timeout
    while time.time() < end:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed: the process is gone
                break
            if not chunk:
                break
            shown += chunk
        elif pending and shown.endswith(b"> "):  # prompt shown, waiting for the next line
            os.write(master, pending.pop(0).encode())
        elif proc.poll() is not None:
            break
    proc.kill()
    os.close(master)
    return proc.wait(), shown.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, list[str]]:
    """(run dir, training source sentences) of the toy rnnsearch on a smaller corpus."""
    run = tmp_path_factory.mktemp("first_use") / "run"
    args = sets(*SMALL, "train.max_steps=30", f"train.run_dir={run}")
    assert main(["train", str(TOY), *args]) == 0
    src, _ = load_split(load_config(TOY, [a for a in args if a != "--set"]).data, "train")
    return run, src


def corpus_words(sentences: list[str]) -> set[str]:
    return {w for s in sentences for w in s.split()}


# ----------------------------------------------------------------------------- 1 unknown words


def test_translate_warns_once_with_count_and_share_of_unknown_words(trained):
    run, src = trained
    known = corpus_words(src)
    text = [src[0], "hello world, how are you?", src[1] + " zzyzx"]
    words = [w for line in text for w in line.split()]
    unknown = [w for w in words if w not in known]
    proc = run_nmt("translate", str(run), stdin="".join(l + "\n" for l in text))
    assert proc.returncode == 0, proc.stderr
    warnings = [l for l in proc.stderr.splitlines() if "WARNING" in l]
    share = 100 * len(unknown) / len(words)
    assert len(warnings) == 1, proc.stderr
    assert (
        f"stdin: {len(unknown)} of {len(words)} source words ({share:.1f}%) are not in the "
        f"model's vocabulary"
    ) in warnings[0]
    assert len(proc.stdout.splitlines()) == 3


def test_translate_verbose_names_unknown_words_per_line(trained):
    run, src = trained
    text = [src[0], "hello world", src[1] + " zzyzx"]
    proc = run_nmt("translate", str(run), "--verbose", stdin="".join(l + "\n" for l in text))
    assert proc.returncode == 0, proc.stderr
    n = len(src[1].split()) + 1
    assert (
        "stdin line 2: 2 of 2 words are not in the model's vocabulary: hello world" in proc.stderr
    )
    assert f"stdin line 3: 1 of {n} words are not in the model's vocabulary: zzyzx" in proc.stderr
    assert "stdin line 1:" not in proc.stderr


def test_translate_of_corpus_sentences_warns_nothing(trained):
    run, src = trained
    proc = run_nmt("translate", str(run), stdin="".join(l + "\n" for l in src[:5]))
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr


def test_evaluate_warns_about_unknown_source_words(trained, tmp_path, capsys):
    run, src = trained
    (tmp_path / "src.txt").write_text(f"{src[0]}\nfoo bar\n")
    (tmp_path / "ref.txt").write_text("a\nb\n")
    n = len(src[0].split()) + 2
    assert (
        main(
            [
                "evaluate",
                str(run),
                "--src",
                str(tmp_path / "src.txt"),
                "--ref",
                str(tmp_path / "ref.txt"),
                "--beam",
                "1",
                "--report",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    assert (
        f"{tmp_path / 'src.txt'}: 2 of {n} source words ({200 / n:.1f}%) are not in the "
        f"model's vocabulary"
    ) in capsys.readouterr().err


# ------------------------------------------------------------------------------ 2 logs and bar


def test_training_log_records_start_their_own_line_on_a_terminal(tmp_path):
    args = [
        "train",
        str(TOY),
        *sets(
            *SMALL,
            "train.max_steps=12",
            "train.log_every=1",
            "train.progress=true",
            f"train.run_dir={tmp_path / 'run'}",
        ),
    ]
    rc, shown = run_in_terminal(args, [], streams=("stderr",))
    assert rc == 0, shown
    assert "epoch 1:" in shown and ("it/s" in shown or "s/it" in shown)  # the bar was drawn
    records = [m.start() for m in RECORD.finditer(shown)]
    assert len(records) >= 12  # a line per step at least
    # a terminal starts a line after \n (or \r, which returns to column 0 after the bar is erased)
    glued = [shown[max(0, i - 40) : i + 30] for i in records if i and shown[i - 1] not in "\r\n"]
    assert not glued, glued


def test_training_log_piped_has_one_record_per_line_and_no_bar(tmp_path):
    """As in `nmt train ... 2>&1 | tee log`: stderr is a pipe."""
    proc = run_nmt(
        "train",
        str(TOY),
        *sets(
            *SMALL,
            "train.max_steps=6",
            "train.log_every=1",
            "train.progress=true",
            f"train.run_dir={tmp_path / 'run'}",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert sum(1 for l in lines if re.match(r"\d\d:\d\d:\d\d INFO step \d+: loss", l)) == 6
    assert all(RECORD.match(l) for l in lines if "INFO" in l)


# ------------------------------------------------------------------------------ 3 failed train


def test_mistyped_architecture_suggests_the_name_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", str(TOY), *sets(*SMALL, "train.max_steps=2", f"train.run_dir={run}")]
    assert main([*args, "--set", "model.arch=rnnsearc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error: unknown architecture 'model.arch: rnnsearc'")
    assert "did you mean 'rnnsearch'?" in err and "\n" not in err
    assert not run.exists()
    assert main(args) == 0  # the same command without the typo just works
    assert (run / "best.pt").is_file()


def test_model_that_fails_to_build_leaves_no_run_dir(tmp_path, monkeypatch, capsys):
    from nmt.errors import NmtError
    from nmt.models import registry

    def broken(cfg, src_vocab, tgt_vocab):
        raise NmtError(f"this model cannot be built for {src_vocab} source pieces")

    monkeypatch.setitem(registry._BUILDERS, "rnnsearch", broken)  # its config is still valid
    run = tmp_path / "run"
    assert main(["train", str(TOY), *sets(*SMALL, f"train.run_dir={run}")]) == 2
    assert "cannot be built" in capsys.readouterr().err
    assert not run.exists()


# ---------------------------------------------------------------------------- 8 smaller things


def test_interactive_translate_has_a_prompt_and_line_editing(trained, tmp_path):
    run, src = trained
    sentence = src[0]
    (tmp_path / "in.txt").write_text(sentence + "\n")
    assert (
        main(
            ["translate", str(run), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
        )
        == 0
    )
    want = (tmp_path / "out.txt").read_text().strip()
    # type the sentence with its second-to-last letter missing, go back one letter, insert it
    typed = sentence[:-2] + sentence[-1] + "\x1b[D" + sentence[-2] + "\r"
    rc, shown = run_in_terminal(
        ["translate", str(run)], [typed, "\x04"], streams=("stdin", "stdout", "stderr")
    )
    assert rc == 0, shown
    assert "interactive mode" in shown and shown.count("> ") >= 2
    assert "^[[D" not in shown
    assert re.search(rf"^{re.escape(want)}\r?$", shown, re.M), shown


def test_translate_help_explains_interactive_mode_and_nbest_format():
    out = run_nmt("translate", "--help").stdout
    flat = " ".join(out.split())
    assert "interactive: a '> ' prompt, line editing and history; Ctrl-D ends" in flat
    assert "'INDEX ||| HYPOTHESIS ||| SCORE'" in flat
    assert "a blank input is not decoded and gives K entries with an empty hypothesis" in flat
    assert "--verbose" in out


def test_nbest_gives_k_empty_entries_for_a_blank_line(trained, tmp_path):
    run, src = trained
    (tmp_path / "in.txt").write_text(f"{src[0]}\n\n{src[1]}\n")
    assert (
        main(
            [
                "translate",
                str(run),
                "-i",
                str(tmp_path / "in.txt"),
                "-o",
                str(tmp_path / "out.txt"),
                "--nbest",
                "3",
                "--beam",
                "3",
            ]
        )
        == 0
    )
    rows = (tmp_path / "out.txt").read_text().splitlines()
    assert len(rows) == 9
    assert rows[3:6] == ["1 |||  ||| 0.0000"] * 3
    assert all(r.startswith("0 ||| ") and r != "0 |||  ||| 0.0000" for r in rows[:3])


def test_data_synth_help_has_descriptions_and_defaults():
    out = " ".join(run_nmt("data", "synth", "--help").stdout.split())
    for text in (
        "training pairs (default: 50000)",
        "validation pairs (default: 1000)",
        "test pairs (default: 3000)",
        "(default: 400)",
        "--overwrite",
    ):
        assert text in out


def test_data_synth_refuses_to_overwrite_without_overwrite(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert (
        main(["data", "synth", "--out", str(out), "--train", "20", "--valid", "5", "--test", "5"])
        == 0
    )
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert (
        main(["data", "synth", "--out", str(out), "--train", "30", "--valid", "5", "--test", "5"])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"nmt: error: {out} already holds train.src, train.tgt")
    assert err.endswith("pass --overwrite to replace them")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert (
        main(
            [
                "data",
                "synth",
                "--out",
                str(out),
                "--train",
                "30",
                "--valid",
                "5",
                "--test",
                "5",
                "--overwrite",
            ]
        )
        == 0
    )
    assert len((out / "train.src").read_text().splitlines()) == 30


def test_version_and_missing_actions():
    version = run_nmt("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"nmt {nmt.__version__}"
    bare = run_nmt()
    assert bare.returncode == 2 and "COMMAND" in bare.stdout
    data = run_nmt("data")
    assert data.returncode == 2
    assert "the following arguments are required: ACTION" in data.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_train_says_where_the_checkpoint_is_and_how_to_resume(tmp_path, sig):
    run = tmp_path / "run"
    overrides = [*SMALL, "train.max_steps=100000", "train.log_every=1", f"train.run_dir={run}"]
    cmd = nmt_cmd("train", str(TOY), *sets(*overrides))
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        end = time.time() + 120
        while not step_checkpoints(run) and not (run / "metrics.jsonl").is_file():
            assert time.time() < end and proc.poll() is None
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig.value, err  # 130 for SIGINT, 143 for SIGTERM
    (ckpt,) = step_checkpoints(run)
    assert f"nmt: training interrupted by {sig.name}; checkpoint saved at {ckpt}" in err
    resume = (
        f"nmt: continue with: nmt train {TOY} "
        + " ".join(f"--set={kv}" for kv in overrides)
        + " --resume"
    )
    assert resume in err
