"""A llama-server that dies by a signal is reported in words (issue #9), without a real llama.cpp.

The stand-in server is a shell script in a directory named by $VERIFIER_LLAMA_BIN_DIR, the
same place the engine code looks for the real one; it kills itself with SIGILL, as a
llama.cpp built with native CPU flags does on a machine that blocks those instructions.
"""

import signal
from pathlib import Path

import pytest

from verifier.testbed import engines


def fake_llama_server(tmp_path: Path, sig: str) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    exe = d / "llama-server"
    # No core file: the crash is the point, a core dump would only litter the machine.
    exe.write_text(f"#!/bin/sh\nulimit -c 0\necho 'llama threadpool init'\nkill -s {sig} $$\n")
    exe.chmod(0o755)
    return d


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    p = tmp_path / "stand-in.gguf"
    p.write_bytes(b"GGUF")
    return p


def test_engine_start_reports_sigill_in_words_with_the_portable_build_hint(tmp_path, monkeypatch, capsys, gguf):
    monkeypatch.setenv("VERIFIER_LLAMA_BIN_DIR", str(fake_llama_server(tmp_path, "ILL")))
    config = engines.StartConfig(port=0, log=str(tmp_path / "server.log"), model_file=str(gguf))
    assert engines.start_foreground(config) == 1
    err = capsys.readouterr().err
    assert "llama-server was killed by SIGILL (illegal instruction) while starting" in err, err
    assert "rebuild it without native CPU flags (CMAKE_ARGS=-DGGML_NATIVE=OFF), see docs/engines.md" in err, err
    assert "exited with -4" not in err
    assert "llama threadpool init" in err  # the last log line, so the user sees where it died
    assert err.count("\n") == 2  # "starting ..." and the one-line error


def test_server_start_raises_the_same_words(tmp_path, monkeypatch, gguf):
    monkeypatch.setenv("VERIFIER_LLAMA_BIN_DIR", str(fake_llama_server(tmp_path, "ILL")))
    srv = engines.Server(model_file=gguf, log_path=tmp_path / "server.log")
    with pytest.raises(engines.EngineError, match=r"was killed by SIGILL \(illegal instruction\) while starting: rebuild"):
        srv.start()
    assert srv.proc is None  # stopped and forgotten after the failed start


def test_other_signals_and_exit_codes_in_words():
    assert engines.crash_message(1, "while starting", "tail") == "llama-server exited with 1 while starting: tail"
    assert engines.crash_message(-signal.SIGKILL) == "llama-server was killed by SIGKILL (killed)"
    assert engines.crash_message(-signal.SIGSEGV, log_tail="t") == "llama-server was killed by SIGSEGV (segmentation fault): t"
    assert engines.crash_message(-200) == "llama-server was killed by signal 200"
    hinted = engines.crash_message(-signal.SIGILL, log_tail="t")
    assert hinted.startswith("llama-server was killed by SIGILL (illegal instruction): rebuild") and hinted.endswith(". Log: t")
