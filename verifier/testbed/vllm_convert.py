"""GGUF -> bf16 safetensors checkpoint for vLLM. Run by the vLLM environment's python, never imported by the harness
(it needs torch, transformers, gguf and accelerate, which live in that environment only):

    VLLM_PYTHON vllm_convert.py MODEL.gguf OUT_DIR

transformers' GGUF loader dequantizes every tensor; the model is then saved with its tokenizer, whose
tokenizer_config.json carries the GGUF's chat template (vLLM renders with it). Exit 0 and a complete OUT_DIR,
or a non-zero exit with the error as the last line on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{gguf.name} carries no chat template (tokenizer.chat_template)")
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # The GGUF "quantizer" only dequantized on load: the weights are plain bf16 now. Left on the model it would
    # be written into config.json as a quantization_config that vLLM then tries (and fails) to honour.
    model.hf_quantizer = None
    for obj in (model, model.config):
        for attr in ("quantization_config", "is_quantized", "quantization_method"):
            if attr in getattr(obj, "__dict__", {}):
                delattr(obj, attr)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: vllm_convert.py MODEL.gguf OUT_DIR", file=sys.stderr)
        return 2
    convert(Path(argv[0]), Path(argv[1]))
    print(f"converted {argv[0]} -> {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
