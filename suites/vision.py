"""Vision: user messages with image parts (base64 data URLs; http URLs when an item names one).

Three sources, ids `<source>/...`:
- `gen/...`: images drawn here with Pillow at load time, answers known by construction (shape, colour,
  count, rendered text) plus a sweep of sizes that break preprocessing (1x1, 2048x16, 16x2048,
  4096x4096, odd 333x127...). Always included; alone they are the offline `--smoke` subset.
- `easy_vqa/<split>/<i>`: easy-VQA (64x64 shapes, 13 one-word answers), test split.
- `inferencebench/<file>/<i>`: the 10-item chart/OCR set (jsonl with image_path, question, answer).
`--data DIR` may be either dataset's folder or a folder holding them; without it the installed
`easy_vqa` (and `inferencebench_vision`) packages' data folders are used, found via importlib.

Why per-size prompt_tokens: image preprocessing (resize, tiling, token budget) changes how many tokens
an image costs without touching the weights, so `usage.prompt_tokens` per image size is the frontend's
fingerprint (llama.cpp #24146: 121 image tokens instead of 256). The sizes here are chosen to hit it.

A text-only endpoint either refuses images (llama-server: HTTP 500 "image input is not supported")
or answers 200 and hallucinates (llama-cpp-python). The first is `unsupported` (see `unsupported`);
the second is scored as content, faithfully wrong.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

if TYPE_CHECKING:  # PIL is imported where an image is drawn or read, not by every run that loads the suite list
    from PIL import Image, ImageDraw

from verifier.types import Judgement, Parsed, Sample, Suite, Verdict

NAME = "vision"
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}
COLOURS = {"red": (220, 0, 0), "blue": (0, 0, 220), "green": (0, 160, 0), "yellow": (240, 200, 0), "black": (0, 0, 0)}
Q_SHAPE = "What shape is in the image? Answer with one word."
Q_COLOUR = "What colour is the shape in the image? Answer with one word."
Q_FILL = "What colour is this image? Answer with one word."
Q_COUNT = "How many circles are in the image? Answer with just the number."
Q_TEXT = "What text appears in this image? Respond with the text only."


# ---------------------------------------------------------------- generated images (deterministic)


def _draw_shape(d: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], fill: tuple[int, int, int]) -> None:
    x0, y0, x1, y1 = box
    if shape == "circle":
        d.ellipse(box, fill=fill)
    elif shape == "square":
        d.rectangle(box, fill=fill)
    elif shape == "triangle":
        d.polygon([((x0 + x1) // 2, y0), (x1, y1), (x0, y1)], fill=fill)
    else:
        raise ValueError(shape)


def shape_image(w: int, h: int, shape: str, colour: str) -> Image.Image:
    """One shape centred, side 60% of the short edge (square box so a square stays square)."""
    from PIL import Image, ImageDraw
    im = Image.new("RGB", (w, h), "white")
    side = max(1, int(min(w, h) * 0.6))
    x0, y0 = (w - side) // 2, (h - side) // 2
    _draw_shape(ImageDraw.Draw(im), shape, (x0, y0, x0 + side - 1, y0 + side - 1), COLOURS[colour])
    return im


def count_image(n: int, size: int = 320) -> Image.Image:
    """n non-overlapping blue circles on a 3x3 grid, filled row by row."""
    from PIL import Image, ImageDraw
    im = Image.new("RGB", (size, size), "white")
    d, cell = ImageDraw.Draw(im), size // 3
    for i in range(n):
        r, c = divmod(i, 3)
        pad = cell // 5
        _draw_shape(d, "circle", (c * cell + pad, r * cell + pad, (c + 1) * cell - pad, (r + 1) * cell - pad), COLOURS["blue"])
    return im


def text_image(text: str, scale: int = 4) -> Image.Image:
    """PIL's built-in bitmap font (identical everywhere: no system fonts), scaled up with NEAREST so it is legible."""
    from PIL import Image, ImageDraw, ImageFont
    font = ImageFont.load_default_imagefont()
    _, _, tw, th = font.getbbox(text)
    small = Image.new("RGB", (tw + 8, th + 8), "white")
    ImageDraw.Draw(small).text((4, 4), text, fill="black", font=font)
    return small.resize((small.width * scale, small.height * scale), Image.Resampling.NEAREST)


def fill_image(w: int, h: int, colour: str) -> Image.Image:
    from PIL import Image
    return Image.new("RGB", (w, h), COLOURS[colour])


# (id, image factory, question, answer): ids and answers fixed, so a golden stays comparable.
GENERATED: list[tuple[str, Any, str, str]] = [
    ("gen/shape/circle", lambda: shape_image(256, 256, "circle", "red"), Q_SHAPE, "circle"),
    ("gen/shape/square", lambda: shape_image(256, 256, "square", "blue"), Q_SHAPE, "square"),
    ("gen/shape/triangle", lambda: shape_image(256, 256, "triangle", "green"), Q_SHAPE, "triangle"),
    ("gen/colour/yellow", lambda: shape_image(256, 256, "triangle", "yellow"), Q_COLOUR, "yellow"),
    ("gen/colour/red", lambda: shape_image(256, 256, "square", "red"), Q_COLOUR, "red"),
    ("gen/colour/blue", lambda: shape_image(256, 256, "circle", "blue"), Q_COLOUR, "blue"),
    ("gen/count/2", lambda: count_image(2), Q_COUNT, "2"),
    ("gen/count/3", lambda: count_image(3), Q_COUNT, "3"),
    ("gen/count/5", lambda: count_image(5), Q_COUNT, "5"),
    ("gen/text/hello42", lambda: text_image("HELLO 42"), Q_TEXT, "hello 42"),
    ("gen/text/open", lambda: text_image("OPEN"), Q_TEXT, "open"),
    ("gen/text/cat7", lambda: text_image("CAT 7"), Q_TEXT, "cat 7"),
    # The preprocessing sweep: degenerate, extreme aspect ratios, huge, odd dimensions, common sizes.
    ("gen/size/1x1", lambda: fill_image(1, 1, "red"), Q_FILL, "red"),
    ("gen/size/2048x16", lambda: fill_image(2048, 16, "blue"), Q_FILL, "blue"),
    ("gen/size/16x2048", lambda: fill_image(16, 2048, "green"), Q_FILL, "green"),
    ("gen/size/4096x4096", lambda: shape_image(4096, 4096, "circle", "red"), Q_SHAPE, "circle"),
    ("gen/size/333x127", lambda: shape_image(333, 127, "square", "black"), Q_SHAPE, "square"),
    ("gen/size/127x333", lambda: shape_image(127, 333, "triangle", "blue"), Q_SHAPE, "triangle"),
    ("gen/size/64x64", lambda: shape_image(64, 64, "circle", "green"), Q_SHAPE, "circle"),
    ("gen/size/1280x720", lambda: shape_image(1280, 720, "triangle", "red"), Q_SHAPE, "triangle"),
]


def png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=6, optimize=False)  # fixed settings: same bytes every load
    return buf.getvalue()


def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode('ascii')}"


def _sample(sid: str, question: str, answer: str, url: str, size: str, source: str, **meta: Any) -> Sample:
    content = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": url}}]
    return Sample(id=sid, messages=[{"role": "user", "content": content}], target=answer,
                  meta={"source": source, "image_size": size, **meta})


def generated_samples() -> list[Sample]:
    return list(_generated())


@functools.lru_cache(maxsize=1)
def _generated() -> tuple[Sample, ...]:
    """Drawn once per process (the 4096x4096 PNG costs ~1 s); Samples are frozen, so sharing is safe."""
    return tuple(_drawn(entry) for entry in GENERATED)


def _drawn(entry: tuple[Any, ...]) -> Sample:
    sid, make, q, a = entry
    im = make()
    return _sample(sid, q, a, data_url(png_bytes(im)), f"{im.width}x{im.height}", "gen")


# ---------------------------------------------------------------- datasets on disk


def _file_image(path: Path) -> tuple[str, str]:
    from PIL import Image

    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as im:  # header only: the exact dataset bytes are sent, not re-encoded
        size = f"{im.width}x{im.height}"
    return data_url(raw, MIME.get(path.suffix.lower(), "image/png")), size


def easy_vqa_samples(split_dir: Path) -> list[Sample]:
    """split_dir holds questions.json ([question, answer, image_id]) and images/<image_id>.png."""
    rows = json.loads((split_dir / "questions.json").read_text(encoding="utf-8"))
    images: dict[Any, tuple[str, str]] = {}  # one encode per image; ~10 questions share each
    out = []
    for i, (q, a, image_id) in enumerate(rows):
        if image_id not in images:
            images[image_id] = _file_image(split_dir / "images" / f"{image_id}.png")
        url, size = images[image_id]
        out.append(_sample(f"easy_vqa/{split_dir.name}/{i:05d}", f"{q} Answer with one word.", a, url, size, "easy_vqa",
                           image_id=image_id))
    return out


def jsonl_samples(folder: Path) -> list[Sample]:
    """inferencebench layout: *.jsonl rows {image_path, question, answer, task}; `image_url` (http) is sent as-is."""
    out = []
    for f in sorted(folder.glob("*.jsonl")):
        for i, line in enumerate(l for l in f.read_text(encoding="utf-8").splitlines() if l.strip()):
            r = json.loads(line)
            if str(r.get("image_url", "")).startswith(("http://", "https://")):
                url, size = r["image_url"], str(r.get("image_size", "unknown"))
            else:
                url, size = _file_image(folder / r["image_path"])
            out.append(_sample(f"inferencebench/{f.stem}/{i:03d}", r["question"], str(r["answer"]), url, size,
                               "inferencebench", task=r.get("task")))
    return out


def _is_jsonl_layout(folder: Path) -> bool:
    for f in sorted(folder.glob("*.jsonl")):
        with f.open(encoding="utf-8") as fh:  # first line only: other suites' jsonl files can be large
            try:
                keys = set(json.loads(fh.readline() or "{}"))
            except (json.JSONDecodeError, TypeError):
                continue
        if {"question", "answer"} <= keys and keys & {"image_path", "image_url"}:
            return True
    return False


def detect(folder: Path, depth: int = 1) -> Iterator[tuple[str, Path]]:
    """Which layouts a folder has: easy-VQA (itself, `test/`, or the package's `data/test/`), the jsonl
    layout, else (depth permitting) the same for each subfolder, so a folder of datasets works too."""
    found = False
    for cand in (folder, folder / "data"):
        if (cand / "test" / "questions.json").is_file():
            found = True
            yield "easy_vqa", cand / "test"  # the test split only: train is 4x larger and meant for training
            break
        if (cand / "questions.json").is_file():
            found = True
            yield "easy_vqa", cand
            break
    if _is_jsonl_layout(folder):
        found = True
        yield "jsonl", folder
    if not found and depth > 0:
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            yield from detect(sub, depth - 1)


def installed_roots() -> list[Path]:
    """Data folders of the optional PyPI packages, without importing them (no hard dependency)."""
    roots = []
    for pkg, sub in (("easy_vqa", "data"), ("inferencebench_vision", "datasets")):
        spec = importlib.util.find_spec(pkg)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            if (Path(loc) / sub).is_dir():
                roots.append(Path(loc) / sub)
    return roots


def load(data: str | None = None, smoke: bool = False) -> Sequence[Sample]:
    if smoke:
        return generated_samples()
    roots = [Path(data)] if data else installed_roots()
    if data and not Path(data).is_dir():
        raise FileNotFoundError(data)
    found: list[Sample] = []
    for root in roots:
        for kind, path in detect(root):
            found += easy_vqa_samples(path) if kind == "easy_vqa" else jsonl_samples(path)
    if not found:
        from verifier.errors import hinted

        raise hinted(ValueError(f"no vision data found{' in ' + data if data else ''}"),
                     *(() if data else ("pip install easy-vqa", "pass --data DIR")), "--smoke for the generated images only")
    # The generated images are drawn only when selected (~0.5 s of PNG encoding for all 20): `--limit 5` draws 5.
    from .lazy import LazySamples

    return LazySamples([], [*GENERATED, *found], lambda x: [_drawn(x)] if isinstance(x, tuple) else [x])


def request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages}


# ---------------------------------------------------------------- scoring


NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
SYNONYMS = {"grey": "gray", "colour": "color"}
ARTICLES = {"a", "an", "the"}


def normalize(text: str) -> str:
    """Lowercase; punctuation -> space; drop articles; number words -> digits; collapse whitespace."""
    tokens = re.sub(r"[^\w\s]|_", " ", text.casefold()).split()
    return " ".join(NUMBER_WORDS.get(t, SYNONYMS.get(t, t)) for t in tokens if t not in ARTICLES)


def score(sample: Sample, parsed: Parsed) -> Judgement:
    answer = normalize(parsed.content or "")
    ok = bool(answer) and answer == normalize(str(sample.target))
    return Judgement(
        score=float(ok), answer=answer,
        reason="correct" if ok else ("no_answer" if not answer else "wrong_answer"),
        metrics={"accuracy": float(ok)}, signals={"image_size": sample.meta.get("image_size")},
    )


UNSUPPORTED_MODALITY = re.compile(r"image|multimodal|multi-modal|mmproj|vision", re.I)
UNSUPPORTED_PHRASE = re.compile(r"not supported|unsupported|does not support|doesn't support|not enabled|mmproj", re.I)


def unsupported(sample: Sample, status: int, body: str) -> bool:
    """4xx (but not 408/429, which are load, not refusal), or a 5xx that says images are unsupported."""
    if 400 <= status < 500:
        return status not in (408, 429)
    return bool(UNSUPPORTED_MODALITY.search(body) and UNSUPPORTED_PHRASE.search(body))


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    """prompt_tokens per image size (the preprocessing fingerprint) and accuracy per source."""
    tokens: dict[str, list[int]] = defaultdict(list)
    by_source: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for v in verdicts:
        src = by_source[v.sample_id.split("/", 1)[0]]
        src["n"] += 1
        src[v.outcome] += 1
        if v.outcome == "content":
            src["correct"] += int(v.metrics.get("accuracy", 0))
        size, pt = v.signals.get("image_size"), v.signals.get("prompt_tokens")
        if size and isinstance(pt, int):
            tokens[size].append(pt)
    return {
        "prompt_tokens_by_image_size": {
            s: {"n": len(xs), "min": min(xs), "max": max(xs), "mean": round(sum(xs) / len(xs), 2)}
            for s, xs in sorted(tokens.items())
        },
        "by_source": {k: dict(sorted(v.items())) for k, v in sorted(by_source.items())},
    }


SUITE = Suite(
    name=NAME, version="1", load=load, request=request, score=score,
    description="image parts (data URLs): generated shapes/colours/counts/text + size sweep, easy-VQA, chart/OCR",
    defaults={"max_tokens": 64}, unsupported=unsupported, summarize=summarize,
)
