import base64
import io
import json

import pytest
from PIL import Image

from suites import vision as vi
from verifier.testbed.server import Reply, Script, TestServer

LLAMA_SERVER_500 = json.dumps({"error": {"code": 500, "message": "image input is not supported - hint: if this is unexpected, "
                                         "you may need to provide the mmproj", "type": "server_error"}})


def image_of(sample):
    part = next(p for p in sample.messages[0]["content"] if p["type"] == "image_url")
    header, b64 = part["image_url"]["url"].split(",", 1)
    assert header.startswith("data:image/") and header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(b64)))


@pytest.fixture(scope="module")
def generated():
    return vi.load(None, smoke=True)


# ---------------------------------------------------------------- loaders


def test_generated_images_have_the_claimed_sizes(generated):
    ids = [s.id for s in generated]
    assert len(ids) == len(set(ids)) == 20
    sizes = {}
    for s in generated:
        im = image_of(s)
        assert f"{im.width}x{im.height}" == s.meta["image_size"], s.id
        sizes[s.id] = s.meta["image_size"]
        if s.id.startswith("gen/size/"):
            assert s.id.rsplit("/", 1)[1] == s.meta["image_size"]
    assert {"1x1", "2048x16", "16x2048", "4096x4096", "333x127"} <= set(sizes.values())
    assert image_of(next(s for s in generated if s.id == "gen/size/1x1")).getpixel((0, 0)) == vi.COLOURS["red"]


def test_generated_images_are_deterministic_and_answers_hold(generated):
    vi._generated.cache_clear()  # really draw again
    assert [s.to_json() for s in vi.load(None, smoke=True)] == [s.to_json() for s in generated]
    circle = image_of(next(s for s in generated if s.id == "gen/shape/circle"))
    assert circle.getpixel((128, 128)) == vi.COLOURS["red"] and circle.getpixel((2, 2)) == (255, 255, 255)
    # Count images: exactly n blue blobs on the grid diagonal cells that are used.
    three = image_of(next(s for s in generated if s.id == "gen/count/3"))
    centres = [(53 + 106 * c, 53 + 106 * r) for r in range(3) for c in range(3)]
    assert [three.getpixel(p) == vi.COLOURS["blue"] for p in centres] == [True] * 3 + [False] * 6
    # Text rendered with the bitmap font has dark pixels.
    text = image_of(next(s for s in generated if s.id == "gen/text/hello42")).convert("L")
    assert text.getextrema()[0] == 0
    assert {s.target for s in generated if s.id.startswith("gen/count/")} == {"2", "3", "5"}


def test_loaders_on_shared_data(shared_data):
    every = vi.load(str(shared_data))  # a folder of datasets: both layouts detected
    ids = [s.id for s in every]
    assert len(ids) == len(set(ids)) == 20 + 9673 + 10
    by_source = {}
    for s in every:
        by_source[s.meta["source"]] = by_source.get(s.meta["source"], 0) + 1
    assert by_source == {"gen": 20, "easy_vqa": 9673, "inferencebench": 10}
    assert "easy_vqa/test/00000" in ids and "inferencebench/ocr-mini/004" in ids
    only_vqa = vi.load(str(shared_data / "easy_vqa"))
    assert len(only_vqa) == 20 + 9673 and only_vqa[20].target == "triangle" and only_vqa[20].meta["image_size"] == "64x64"
    assert only_vqa[20].messages[0]["content"][0]["text"] == "what is the red shape? Answer with one word."
    bench = vi.load(str(shared_data / "inferencebench_vision"))
    assert [s.id for s in bench[20:]] == [s.id for s in vi.load(str(shared_data / "inferencebench_vision"))[20:]]
    ocr = next(s for s in bench if s.id == "inferencebench/ocr-mini/000")
    assert ocr.target == "april 17" and ocr.meta["task"] == "ocr" and image_of(ocr).size == (320, 80)


def test_http_image_urls_pass_through_and_missing_data_is_an_error(tmp_path):
    row = {"image_url": "https://example.com/cat.png", "question": "What animal?", "answer": "cat", "image_size": "640x480"}
    (tmp_path / "items.jsonl").write_text(json.dumps(row) + "\n")
    s = vi.load(str(tmp_path))[-1]
    assert s.messages[0]["content"][1]["image_url"]["url"] == row["image_url"] and s.meta["image_size"] == "640x480"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError):
        vi.load(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError):
        vi.load(str(tmp_path / "nope"))


def test_normalize_and_unsupported():
    assert vi.normalize("Three.") == "3" and vi.normalize("A circle!") == "circle"
    assert vi.normalize("TOTAL: $89.50") == vi.normalize("total $89.50") and vi.normalize("Grey") == "gray"
    s = vi.load(None, smoke=True)[0]
    assert vi.unsupported(s, 500, LLAMA_SERVER_500) is True
    assert vi.unsupported(s, 500, '{"error": {"message": "multimodal is not enabled"}}') is True
    assert vi.unsupported(s, 500, '{"error": {"message": "CUDA out of memory"}}') is False
    assert vi.unsupported(s, 400, "bad request") is True and vi.unsupported(s, 429, "slow down") is False


# ---------------------------------------------------------------- end to end through the CLI


def server_for(generated, special):
    by_msgs = {json.dumps(s.messages, sort_keys=True): s for s in generated}

    def responder(req):
        s = by_msgs[json.dumps(req["messages"], sort_keys=True)]
        return special(s) or Reply(content=s.target)

    return TestServer(Script(responder))


def run(cli, srv, out):
    return cli("run", "--suite", "vision", "--smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", "--max-retries", "0")


def read(out):
    summary = json.loads((out / "summary.json").read_text())["suites"]["vision"]
    verdicts = {v["sample_id"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    return summary, verdicts


def test_right_and_wrong_answers_and_the_size_fingerprint(tmp_path, cli, generated):
    wrong = {"gen/shape/circle": "square", "gen/count/3": "Three.", "gen/text/open": "The text says OPEN"}
    with server_for(generated, lambda s: Reply(content=wrong[s.id]) if s.id in wrong else None) as srv:
        code, _, err = run(cli, srv, tmp_path / "r")
        sent = srv.script.requests
    assert code == 0, err
    assert all(r["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,") for r in sent)
    s, vs = read(tmp_path / "r")
    assert s["outcomes"] == {"content": 20}
    assert s["metrics"]["accuracy"] == {**s["metrics"]["accuracy"], "value": 0.9, "n": 20}
    assert vs["gen/count/3"]["score"] == 1.0 and vs["gen/count/3"]["answer"] == "3"  # number words -> digits
    assert vs["gen/shape/circle"]["reason"] == "wrong_answer" and vs["gen/text/open"]["reason"] == "wrong_answer"
    big = vs["gen/size/4096x4096"]["signals"]
    assert big["image_size"] == "4096x4096" and isinstance(big["prompt_tokens"], int)
    fp = s["extra"]["prompt_tokens_by_image_size"]
    assert {"1x1", "2048x16", "16x2048", "4096x4096", "333x127"} <= set(fp)
    assert fp["4096x4096"]["n"] == 1 and fp["4096x4096"]["min"] > fp["1x1"]["max"]  # the test server counts the payload
    assert s["extra"]["by_source"]["gen"] == {"content": 20, "correct": 18, "n": 20}


def test_text_only_server_refusing_images_is_unsupported(tmp_path, cli, generated):
    # llama-server without mmproj: HTTP 500 naming images; any other 500 stays infra.
    def special(s):
        if s.id.startswith("gen/text/"):
            return Reply(status=500, body='{"error": {"message": "internal error"}}')
        return Reply(status=500, body=LLAMA_SERVER_500)

    with server_for(generated, special) as srv:
        code, _, err = run(cli, srv, tmp_path / "r")
    assert code == 0, err
    s, vs = read(tmp_path / "r")
    assert s["outcomes"] == {"unsupported": 17, "infra": 3}
    assert s["metrics"] == {} and s["reasons"] == {"http_500": 20}
    assert vs["gen/size/1x1"]["outcome"] == "unsupported" and vs["gen/size/1x1"]["score"] is None
    assert vs["gen/text/open"]["outcome"] == "infra"


def test_text_only_server_hallucinating_is_scored_as_content(tmp_path, cli, generated):
    # llama-cpp-python without a vision handler: 200, an answer made up from the text alone.
    with server_for(generated, lambda s: Reply(content="I see a cat sitting on a mat.")) as srv:
        code, _, err = run(cli, srv, tmp_path / "r")
    assert code == 0, err
    s, vs = read(tmp_path / "r")
    assert s["outcomes"] == {"content": 20} and s["metrics"]["accuracy"]["value"] == 0.0
    assert s["reasons"] == {"wrong_answer": 20} and vs["gen/shape/square"]["findings"] == []
