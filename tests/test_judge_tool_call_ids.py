"""contract.id_style: the shape of a tool-call id, stable across a server's random ids."""

from __future__ import annotations

import random
import string

from verifier.judge.contract import id_style


def test_known_shapes():
    assert id_style("call_0123456789abcdef01234567", None) == "call_<hex>"
    assert id_style("chatcmpl-tool-9f8e7d6c5b4a", None) == "chatcmpl-tool-<hex>"
    assert id_style("functions.get_weather:0", "get_weather") == "functions.NAME:<n>"
    assert id_style("call_123", None) == "call_<n>"


def test_llama_server_random_ids_all_have_one_shape():
    """32 random letters and digits (llama-server 11434): hex-looking pieces inside must not make a shape of their own."""
    rng = random.Random(0)
    ids = ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(32)) for _ in range(500)]
    ids += ["DJUkmrA5pXEXnabc123Z1BEGAR2B3bK4", "vwabc123defTzbZDF6uWn1hyKZ92NtWg"]  # seen as two shapes before
    assert {id_style(i, None) for i in ids} == {"<id>"}
