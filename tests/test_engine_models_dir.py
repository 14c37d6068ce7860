"""`verifier engine start|prepare --model M --models-dir DIR` with the verified GGUF already in DIR serves that file:
no package needed (it used to demand the model's pip packages and exit 1). Without it: one line, exit 2, naming
both ways to get it. A tiny stand-in model is registered, so the real command runs without 500 MB of weights."""

import hashlib

from verifier.testbed import engine_models
from verifier.testbed.engine_models import PackagedModel

DATA = b"GGUF" + bytes(range(256)) * 8


def tiny(monkeypatch) -> PackagedModel:
    m = PackagedModel(key="tiny", description="a stand-in", filename="tiny-q4.gguf",
                      parts=(("verifier_no_such_package_part1", "data/part01.bin"), ("verifier_no_such_package_part2", "data/part02.bin")),
                      size=len(DATA), sha256=hashlib.sha256(DATA).hexdigest(), pip="pip install no-such-package-part1 no-such-package-part2")
    monkeypatch.setitem(engine_models.MODELS, "tiny", m)
    return m


def test_a_verified_gguf_in_models_dir_is_served_without_its_packages(tmp_path, monkeypatch, cli):
    m = tiny(monkeypatch)
    (tmp_path / m.filename).write_bytes(DATA)
    code, out, err = cli("engine", "prepare", "--model", "tiny", "--models-dir", tmp_path)
    assert code == 0 and out.strip() == str(tmp_path / m.filename), err


def test_without_it_one_line_exit_2_names_the_packages_and_the_models_dir(tmp_path, monkeypatch, cli):
    m = tiny(monkeypatch)
    (tmp_path / m.filename).write_bytes(DATA[:-1] + b"x")  # same size, wrong bytes: not served
    code, out, err = cli("engine", "prepare", "--model", "tiny", "--models-dir", tmp_path)
    assert code == 2 and err.count("\n") == 1, err
    assert m.pip in err and f"put the verified {m.filename} into --models-dir" in err, err


def test_engine_start_chooses_threads_for_the_machine(monkeypatch):
    import os

    from verifier.testbed import engines

    for cpus, want in ((1, 1), (2, 1), (8, 4)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)), raising=False)
        assert engines.default_threads() == want
