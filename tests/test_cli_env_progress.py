"""Environment defaults (flags win) and progress output that suits a CI log."""

import io
import json

from verifier.execution import runner


def test_openai_base_url_and_verifier_env_are_read(server, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("VERIFIER_MODEL", "env-model")
    monkeypatch.setenv("VERIFIER_CONCURRENCY", "3")
    code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "3", "--quiet", "--out", tmp_path / "a")
    assert code == 0, err
    hdr = json.loads((tmp_path / "a" / "run.json").read_text())
    assert hdr["endpoint"]["model"] == "env-model"
    assert server.script.requests and all(r["model"] == "env-model" for r in server.script.requests)
    # A flag beats the environment.
    code, _, _ = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--quiet", "--model", "flag-model",
                     "--out", tmp_path / "b")
    assert code == 0
    assert json.loads((tmp_path / "b" / "run.json").read_text())["endpoint"]["model"] == "flag-model"


def test_env_values_are_checked_like_flags(cli, monkeypatch, capsys):
    import pytest

    monkeypatch.setenv("VERIFIER_CONCURRENCY", "many")
    with pytest.raises(SystemExit) as e:
        cli("run", "--suite", "smoke", "--base-url", "http://127.0.0.1:1/v1", "--model", "m")
    assert e.value.code == 2 and "--concurrency" in capsys.readouterr().err


def test_missing_base_url_without_env_is_still_required(cli, monkeypatch, capsys):
    import pytest

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = cli("gate", "--golden", "g", "--model", "m")  # merged with a gate file and the environment first
    assert code == 2 and "--base-url" in err and err.count("\n") == 1


def test_api_key_comes_from_openai_api_key_and_is_never_written(server, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-env")
    code, _, _ = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--model", "m", "--quiet", "--out", tmp_path / "r")
    assert code == 0
    assert server.script.headers[-1].get("Authorization") == "Bearer sk-secret-from-env"
    for f in (tmp_path / "r").iterdir():
        assert "sk-secret-from-env" not in f.read_text()


class Pipe(io.StringIO):
    def isatty(self):
        return False


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_without_a_tty_is_plain_lines_per_interval():
    out = Pipe()
    p = runner.Progress(50, quiet=False, stream=out, interval=3600)
    for i in range(50):
        p.tick(error=i == 7)
    text = out.getvalue()
    assert "\r" not in text
    assert text.splitlines() == ["progress: 50/50 errors=1 " + text.split("errors=1 ")[1].strip()]  # only the final line
    out = Pipe()
    p = runner.Progress(3, quiet=False, stream=out, interval=0)
    for _ in range(3):
        p.tick(error=False)
    assert [line.split(" errors")[0] for line in out.getvalue().splitlines()] == ["progress: 1/3", "progress: 2/3", "progress: 3/3"]


def test_progress_on_a_tty_redraws_in_place():
    out = Tty()
    p = runner.Progress(2, quiet=False, stream=out, interval=0)
    p.tick(False)
    p.tick(False)
    assert out.getvalue().count("\r") == 2 and out.getvalue().endswith("\n")
