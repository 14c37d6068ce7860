"""A run is collected by the steps in `app/collect.STEPS`, in that order, over one `Collection` (issue 45): a new step
is one class and one entry in the list, and sees what the steps before it put in the collection. A resume is how the
collection is prepared: the same steps complete the run."""

import json

from verifier.app import collect
from verifier.types import RunHeader


class Watch:
    """A step added to the list: what it finds in the collection when its turn comes."""

    def __init__(self, seen: list[dict]):
        self.seen = seen

    async def run(self, c: collect.Collection) -> None:
        on_disk = json.loads((c.run_dir / "run.json").read_text())
        self.seen.append({"header": c.header, "on_disk": on_disk, "work": len(c.work), "sent": c.sent.sent,
                          "server_info": c.server_info, "resumed": c.resumed, "journaled": len(c.journaled)})


def test_the_steps_are_one_list_in_order():
    assert [type(s).__name__ for s in collect.STEPS] == [
        "Preflight", "Begin", "Probes", "ContextProbe", "Samples", "Resend", "TeacherForcing"]
    samples = next(s for s in collect.STEPS if isinstance(s, collect.Samples))
    assert isinstance(samples.after_batch, collect.SequentialLook)


def test_a_new_step_is_one_entry_in_the_list_and_sees_the_steps_before_it(server, tmp_path, cli, monkeypatch):
    seen: list[dict] = []
    steps = list(collect.STEPS)
    steps.insert(steps.index(next(s for s in steps if isinstance(s, collect.Samples))), Watch(seen))
    steps.append(Watch(seen))
    monkeypatch.setattr(collect, "STEPS", tuple(steps))
    out = tmp_path / "r"
    code, _, err = cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--concurrency", "1",
                       "--base-url", server.url, "--out", out)
    assert code == 0, err
    before, after = seen
    # After Begin: run.json is written from the typed header, the plan made, nothing sent yet.
    assert isinstance(before["header"], RunHeader) and before["header"].to_json() == before["on_disk"]
    assert before["work"] > 0 and before["sent"] == 0 and before["resumed"] is None
    assert before["on_disk"]["server_info"] == before["server_info"] and "finished" in before["on_disk"]
    assert before["on_disk"]["finished"] is None
    # After the last step every planned request was sent; run.json is finished once the steps are done.
    assert after["sent"] == before["work"]
    final = json.loads((out / "run.json").read_text())
    assert final["finished"] and {k: v for k, v in final.items() if k != "finished"} == \
        {k: v for k, v in before["on_disk"].items() if k != "finished"}


def test_a_resume_runs_the_same_steps_on_the_prepared_collection(server, tmp_path, cli, monkeypatch):
    out = tmp_path / "r"
    assert cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--concurrency", "1",
               "--base-url", server.url, "--out", out)[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    (out / "responses.jsonl").write_text("".join(lines[:4]))
    seen: list[dict] = []
    monkeypatch.setattr(collect, "STEPS", (*collect.STEPS, Watch(seen)))
    code, _, err = cli("run", "--resume", out, "--base-url", server.url, "--quiet")
    assert code == 0, err
    (after,) = seen
    assert isinstance(after["resumed"], RunHeader) and after["journaled"] == 4
    assert after["sent"] == after["work"] == len(lines) - 4  # only what the journal did not hold


def test_a_resume_of_an_older_run_json_adds_only_what_a_resume_adds(server, tmp_path, cli):
    out = tmp_path / "r"
    assert cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--concurrency", "1",
               "--base-url", server.url, "--out", out)[0] == 0
    hdr = json.loads((out / "run.json").read_text())
    del hdr["format"], hdr["started"]  # written before these keys existed
    (out / "run.json").write_text(json.dumps(hdr))
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    (out / "responses.jsonl").write_text("".join(lines[:3]))
    assert cli("run", "--resume", out, "--base-url", server.url, "--quiet")[0] == 0
    again = json.loads((out / "run.json").read_text())
    assert "format" not in again and "started" not in again
    assert sorted(again) == sorted(hdr) and again["finished"]
