"""Goldens: a blessed reference run reduced to small, diffable text, plus calibrated margins.

goldens/<name>/golden.json     header, suite versions, selection, modes, epochs, probes, summary, margins + provenance
goldens/<name>/samples.jsonl   one observation per (suite, sample, epoch, mode), sorted
goldens/<name>/inputs.jsonl    the samples themselves (messages, tools, targets) exactly as the reference run sent
                               them: a golden that travels from a model maker to a provider gates with nothing else

Goldens shipped with the package live in verifier/goldens/ (package data) and are found by name (`resolve`).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from verifier import safewrite
from verifier.execution import journal, rundir, scoring
from verifier.execution import observations as observe
from verifier.execution.rundir import RunDir
from verifier.execution.observations import MAX_CONTENT as MAX_CONTENT, MAX_LOGPROBS as MAX_LOGPROBS, MAX_TOP as MAX_TOP  # a golden's caps
from verifier.types import Observation, RunSummary, Sample, owner_ids
from verifier import jsonsafe, safeio, scrub
from verifier.golden.model import Golden, GoldenHeader, Margin, add_metric_spans, implausible_margin
from verifier.surfaces.registry import REFERENCE_MODE

FORMAT = 2
"""2: inputs.jsonl (the samples) is part of the golden. Bump with golden/schema.SCHEMA_VERSION."""
GOLDEN = "golden.json"
OBS = "samples.jsonl"
INPUTS = "inputs.jsonl"
PACKAGED = Path(__file__).resolve().parent.parent / "goldens"  # verifier/goldens/
"""The goldens installed with the package (package data), found by name from any directory."""


class BadGolden(ValueError):
    """A golden that cannot be used: corrupt, another suite version, no margins..."""


def observations(run_dir: Path) -> list[Observation]:
    """Everything compare needs from a run, per record: verdict facts plus text and logprobs from the journal.

    Read from RUN_DIR/observations.jsonl (RunDir.observations, the one reader), which scoring wrote from its one
    parse of the journal. A run whose file is missing or no longer matches its journal, verdicts and seal is refused
    here: the app scores it again first (app/scored.observed); there is no second way to parse the journal."""
    rows = RunDir(run_dir).observations()
    if rows is None:
        raise journal.NotARunDir(f"{run_dir}: {observe.OBSERVATIONS} is missing or does not match the journal; "
                                 f"run `verifier score {run_dir}`")
    return rows


def portable(obj: Any) -> Any:
    """Goldens are committed: absolute file paths a server reports (e.g. llama.cpp's model_path) keep only their file name."""
    if isinstance(obj, dict):
        return {k: portable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v) for v in obj]
    if isinstance(obj, str) and re.fullmatch(r"(/[^/\s]+){2,}/?|[A-Za-z]:\\[^\s]+", obj):
        return Path(obj).name or obj
    return obj


def bless(run_dir: Path, to: Path, margins: Mapping[str, Margin] | None = None,
          scored: tuple[list[Observation], RunSummary | None] | None = None) -> GoldenHeader:
    """The golden of a scored run. `scored`: its rows and summary as the caller obtained them (app/scored: scored
    again in memory for a run this user may not write); else read from the run's files, which must be fresh."""
    hdr = rundir.check_run_dir(run_dir)
    scrub.register_run(hdr.get("endpoint"))  # the golden is scrubbed of the key its run was made with
    summary_path = Path(run_dir) / scoring.SUMMARY
    if scored is None and not summary_path.exists():
        raise journal.NotARunDir(f"{run_dir} has not been scored; run `verifier score {run_dir}`")
    rows, summary = scored if scored is not None else (observations(run_dir), RunDir(run_dir).summary())
    # A golden keeps chosen tokens only: the alternatives matter on the candidate's side of a parting.
    obs = [{k: v for k, v in o.to_dict().items() if k != "top_logprobs"} for o in rows]
    info = portable(hdr.get("server_info") or {})
    g = {
        "golden_format": FORMAT,
        "name": to.name,
        "source": {
            "run_id": hdr.get("run_id"), "harness": hdr.get("harness"), "endpoint": hdr.get("endpoint"),
            "server_info": info, "sampling": hdr.get("sampling"), "extra_body": hdr.get("extra_body"),
            "started": hdr.get("started"), "finished": hdr.get("finished"),
        },
        "suites": hdr["suites"],
        "selection": hdr.get("selection", {}),
        "epochs": hdr.get("epochs", 1),
        "modes": hdr.get("modes", [REFERENCE_MODE]),
        "summary": summary.to_json() if summary is not None else None,  # the document, key for key
        "margins": {k: m.to_json() for k, m in margins.items()} if margins is not None else None,
        "probes": RunDir(run_dir).probes(),
        "context_probe": RunDir(run_dir).context(),
    }
    inputs = [{"suite": suite, **journal.sample_fields(x)} for (suite, _), x in journal.read_samples(run_dir, legacy=False).items()
              if suite in g["suites"]]
    def fill(tmp: Path) -> None:
        safewrite.write_jsonl(tmp / OBS, obs)
        safewrite.write_jsonl(tmp / INPUTS, inputs)
        safewrite.write_json(tmp / GOLDEN, g)

    _swap_in(to, fill)
    return GoldenHeader.from_json(g)


def _swap_in(to: Path, fill: Callable[[Path], None]) -> None:
    """Write a golden into a fresh directory next to `to`, then swap it into place.

    The swap is one atomic exchange of the two directories where the kernel offers it (Linux renameat2
    RENAME_EXCHANGE); elsewhere two renames, old aside then new in, and a kill between them is repaired by the
    next command that looks for the golden (`recover`). Either way a reader finds the old golden or the new
    one, never a golden.json of one run beside the samples.jsonl of another. Other files are carried over.
    """
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    recover(to)
    # os.mkdir, not mkdtemp: the golden directory gets the umask's mode like any other the user makes (mkdtemp's
    # 0700 would lock out the team that reviews it); the random part keeps two blesses apart.
    tmp = to.parent / f".{to.name}.new-{os.getpid()}-{secrets.token_hex(6)}"
    os.mkdir(tmp)
    old = to.with_name(f".{to.name}.old-{os.getpid()}")
    try:
        fill(tmp)
        if to.exists():
            for f in to.iterdir():
                if f.name not in (GOLDEN, OBS, INPUTS) and f.is_file() and not f.is_symlink() and ".tmp" not in f.name:
                    shutil.copy2(f, tmp / f.name)
            if _exchange(tmp, to):
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old golden
                return
            os.rename(to, old)
        os.rename(tmp, to)
    except BaseException:
        if old.exists() and not to.exists():
            os.rename(old, to)  # the old golden back in place
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (renameat2 with RENAME_EXCHANGE); False where the system cannot."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return bool(fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(to: Path) -> None:
    """A bless killed between its two renames left no golden at `to` and the old one aside as
    `.NAME.old-PID`: put it back (only when that process is gone, and nothing took its place). The new
    golden it was building (`.NAME.new-PID-*`) is removed."""
    to = Path(to)
    if not to.parent.is_dir():
        return
    for half in to.parent.glob(f".{glob.escape(to.name)}.new-*-*"):  # a killed bless's unfinished new golden
        pid = half.name.rsplit(".new-", 1)[-1].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(half, ignore_errors=True)
    if (to / GOLDEN).exists():
        return
    for aside in sorted(to.parent.glob(f".{glob.escape(to.name)}.old-*")):
        pid = aside.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)) and (aside / GOLDEN).is_file() and not to.exists():
            os.rename(aside, to)
            return


def _rows(path: Path, max_bytes: int, what: str, max_line: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSONL file of the golden, read as a regular file under its caps (safeio): the file's
    and one line's, so a planted 500 MB line is refused after `max_line` bytes, never parsed."""
    from verifier.golden.schema import MAX_ROWS

    n = 0
    for n, raw in enumerate(safeio.iter_lines(path, max_bytes=max_bytes, within=path.parent, max_line=max_line), 1):
        if n > MAX_ROWS:
            raise BadGolden(f"golden {path.parent}: {what} has more than {MAX_ROWS} lines")
        if not raw.endswith(b"\n"):
            return  # a torn tail (killed mid-write)
        if raw.isspace():
            continue
        yield n, journal.decode_line(raw, path, n)


def load_header(path: Path) -> GoldenHeader:
    """golden.json alone, validated as `load` validates it: what `list-goldens` shows, without reading a row (a
    100,000-row golden is listed in milliseconds, not minutes)."""
    return _header(Path(path))[1]


def _header(path: Path) -> tuple[dict[str, Any], GoldenHeader]:
    from verifier.golden.schema import MAX_GOLDEN_BYTES, problem

    recover(path)
    gp = path / GOLDEN
    if not gp.exists() and not gp.is_symlink() or gp.is_dir():  # a FIFO, device or link is refused by safeio below
        from verifier.errors import did_you_mean

        names = [p.name for p in packaged()]
        guess = did_you_mean(path.name, names).strip()  # "did you mean demo-smoke?" for a typo of a packaged name
        listed = f"{guess} (packaged goldens: verifier list-goldens)" if guess else f"packaged goldens: {', '.join(names)} (verifier list-goldens)"
        raise BadGolden(f"{path} is not a golden (no {GOLDEN})" + (f"; {listed}" if names else ""))
    try:
        g = jsonsafe.loads(safeio.read_text(gp, max_bytes=MAX_GOLDEN_BYTES, within=path))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise BadGolden(f"golden {path} is corrupt: {getattr(e, 'msg', None) or e}") from None
    except (safeio.UnsafeFile, OSError) as e:
        raise BadGolden(f"golden {path}: {e}") from None
    if not isinstance(g, dict) or not isinstance(g.get("golden_format"), int) or isinstance(g.get("golden_format"), bool):
        raise BadGolden(f"golden {path} is corrupt: {GOLDEN} has no golden_format")
    if g["golden_format"] != FORMAT:
        age = "an older" if g["golden_format"] < FORMAT else "a newer"
        raise BadGolden(f"golden {path} is golden_format {g['golden_format']} ({age} verifier's); this verifier reads "
                        f"format {FORMAT}: " + ("re-bless it from its reference run (`verifier bless RUN --to DIR --force`)"
                                                if g["golden_format"] < FORMAT else "upgrade verifier"))
    why = problem(g, "golden")
    if why:
        raise BadGolden(f"golden {path}: {GOLDEN} {why}")
    return g, GoldenHeader.from_json(g)


def load(path: Path, limit: int | None = None) -> Golden:
    """A golden, validated once against its schema (golden/schema.py: types and bounds of every field) and its own
    invariants: anything malformed is a BadGolden naming the file, line and field. This is the trust boundary:
    every value above it is typed and checked.

    `limit`: only the first `limit` samples of each suite (what `Golden.narrow(limit=)` keeps) and their rows are
    validated and kept; every other row is streamed past: inputs.jsonl's rows are still hashed against each suite's
    dataset_sha256 and checked for duplicates, samples.jsonl's are counted (`Golden.whole_records`). Memory and
    schema checks follow the samples gated, not the golden's size."""
    path = Path(path)
    _, header = _header(path)
    spans: dict[str, tuple[float, float]] = {}
    if limit:
        inputs, digests = _inputs(path, header, limit)
        kept = {(suite, sid) for suite, samples in inputs.items() for s in samples for sid in (s.id, *_turn_ids(s))}
        obs, records = _observations(path, header, kept, spans)
    else:  # the rows first, as before: a bad row is named before a missing inputs.jsonl
        obs, records = _observations(path, header, None, spans)
        inputs, digests = _inputs(path, header)
    have = {(suite, sid) for suite, samples in inputs.items() for s in samples for sid in (s.id, *_turn_ids(s))}
    missing = sorted((o.suite, o.sample_id) for o in obs if not any((o.suite, sid) in have for sid in owner_ids(o.sample_id)))
    if missing:
        raise BadGolden(f"golden {path}: {INPUTS} lacks sample {missing[0][0]}/{missing[0][1]} "
                        f"({len(missing)} observed samples have no input)")
    _check_digests(path, header, digests)
    # Every row's metrics widen the spans, a limited load's streamed-past rows too: the bounds are the whole golden's.
    why = implausible_margin(header, spans)
    if why:
        raise BadGolden(f"golden {path}: {GOLDEN} {why}")
    return Golden(path=path, header=header, observations=tuple(obs), inputs=inputs,
                  whole_records=records if limit else None)


def _observations(path: Path, header: GoldenHeader, kept: set[tuple[str, str]] | None,
                  spans: dict[str, tuple[float, float]]) -> tuple[list[Observation], int]:
    """samples.jsonl's rows, each validated, and the number of records (suite, sample) it holds. `kept`: only the rows
    of these samples are validated and kept (a row of another sample is counted and dropped). `spans` is widened by
    every row's metrics, kept or not (what bounds a metric's margin: model.implausible_margin)."""
    from verifier.golden.schema import MAX_SAMPLES_BYTES, MAX_SAMPLES_LINE, problem

    seen: set[tuple[Any, ...]] = set()
    records: set[tuple[Any, Any]] = set()
    obs: list[Observation] = []
    try:
        rows = _rows(path / OBS, MAX_SAMPLES_BYTES, OBS, MAX_SAMPLES_LINE) if (path / OBS).exists() or (path / OBS).is_symlink() else iter(())
        for n, o in rows:
            sid = o.get("sample_id")
            records.add((o.get("suite"), sid) if isinstance(sid, str) else (None, n))
            add_metric_spans(spans, o.get("suite"), o.get("metrics"))
            if kept is not None and not (isinstance(sid, str) and any((o.get("suite"), x) in kept for x in owner_ids(sid))):
                continue  # a sample past the limit: never gated, so neither checked nor kept
            why = problem(o, "observation")
            if why is None and o["suite"] not in header.suites:
                why = f"$.suite: {o['suite']!r} is not one of the golden's suites"
            if why is None and o["mode"] not in header.modes:
                why = f"$.mode: {o['mode']!r} is not one of the golden's modes"
            if why is None and o["epoch"] >= header.epochs:
                why = f"$.epoch: {o['epoch']} is not below the golden's epochs ({header.epochs})"
            key = (o.get("suite"), sid, o.get("epoch"), o.get("mode"))
            if why is None and key in seen:
                why = "duplicate record (suite, sample_id, epoch, mode)"
            if why:
                raise BadGolden(f"golden {path}: {OBS} line {n}: {why}")
            seen.add(key)
            obs.append(Observation.from_dict(o))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, journal.NotARunDir) as e:
        raise BadGolden(f"golden {path} is corrupt: {getattr(e, 'msg', None) or e}") from None
    except (safeio.UnsafeFile, OSError) as e:
        raise BadGolden(f"golden {path}: {e}") from None
    if not records:
        raise BadGolden(f"golden {path} has no samples")
    return obs, len(records)


def _turn_ids(s: Sample) -> list[str]:
    """The record ids of a legacy multi-turn sample's turns (journal.legacy_turn_samples), else none."""
    ids = s.meta.get("turn_ids") if isinstance(s.meta, dict) else None
    return [x for x in ids if isinstance(x, str)] if isinstance(ids, list) else []


def _inputs(path: Path, header: GoldenHeader, limit: int | None = None) -> tuple[dict[str, tuple[Sample, ...]], dict[str, str]]:
    """The golden's samples per suite, in the order the reference sent them, validated against the golden's whole
    suite list: every kept record against the schema, no duplicate, and each suite's samples (all of them, kept or
    not) hashing to the dataset_sha256 the run recorded (an edited prompt would gate something the reference never
    answered: `_check_digests`, with the digests returned). `limit`: the first `limit` samples of each suite are kept
    (a legacy conversation's turn rows count as one sample); the others are hashed, one at a time, and dropped."""
    from verifier.golden.schema import MAX_INPUTS_BYTES, MAX_INPUTS_LINE, problem

    ip = path / INPUTS
    if not ip.exists() and not ip.is_symlink():
        raise BadGolden(f"golden {path} has no {INPUTS} (its samples); re-bless it from its reference run")
    out: dict[str, list[Sample]] = {name: [] for name in header.suites}
    hashes = {name: hashlib.sha256() for name in header.suites}
    chosen: dict[str, dict[str, None]] = {name: {} for name in header.suites}  # the first `limit` sample keys, in order
    seen: set[tuple[str, str]] = set()
    try:
        for n, rec in _rows(ip, MAX_INPUTS_BYTES, INPUTS, MAX_INPUTS_LINE):
            suite, sid = rec.get("suite"), rec.get("id")
            if not isinstance(suite, str) or suite not in out or not isinstance(sid, str):
                why = problem(rec, "input") or f"$.suite: {suite!r} is not one of the golden's suites"
                raise BadGolden(f"golden {path}: {INPUTS} line {n}: {why}")
            if (suite, sid) in seen:
                raise BadGolden(f"golden {path}: {INPUTS} line {n}: duplicate sample (suite, id)")
            seen.add((suite, sid))
            owner = sid.split("/", 1)[0] if "/" in sid and isinstance(rec.get("meta"), dict) and (
                rec["meta"].get("after") or rec["meta"].get("turn") == 1) else sid
            keep = not limit or owner in chosen[suite] or len(chosen[suite]) < limit
            if keep:
                wrong = problem(rec, "input")
                if wrong:
                    raise BadGolden(f"golden {path}: {INPUTS} line {n}: {wrong}")
                chosen[suite].setdefault(owner)
            rec.pop("suite")
            try:
                sample = Sample.from_json(rec)
            except TypeError as e:
                raise BadGolden(f"golden {path}: {INPUTS} line {n}: {e}") from None
            hashes[suite].update(safewrite.canonical(journal.sample_fields(sample)).encode() + b"\n")  # runner.dataset_sha256
            if keep:
                out[suite].append(sample)
    except (journal.NotARunDir, json.JSONDecodeError, RecursionError) as e:
        raise BadGolden(f"golden {path} is corrupt: {getattr(e, 'msg', None) or e}") from None
    except (safeio.UnsafeFile, OSError) as e:
        raise BadGolden(f"golden {path}: {e}") from None
    # Checked as recorded, read as the suites make samples now (older multi-turn goldens: journal.legacy_turn_samples).
    samples = {k: tuple(s for _, s in journal.legacy_turn_samples((k, x) for x in v)) for k, v in out.items()}
    return samples, {name: h.hexdigest() for name, h in hashes.items()}


def _check_digests(path: Path, header: GoldenHeader, digests: Mapping[str, str]) -> None:
    for name, digest in digests.items():
        if name.startswith("lm_eval:"):  # imported lm-eval runs hash lm-eval's own documents, not these samples
            continue
        want = header.suites[name].dataset_sha256
        if want and digest != want:
            raise BadGolden(f"golden {path}: {INPUTS} suite {name} does not hash to the golden's dataset_sha256 "
                            "(edited or from another run)")


def packaged() -> list[Path]:
    """The goldens installed with the package, by name."""
    if not PACKAGED.is_dir():
        return []
    return sorted(p for p in PACKAGED.iterdir() if (p / GOLDEN).is_file())


def resolve(name: str | Path) -> Path:
    """A golden directory, else a packaged golden by name (`demo-smoke`, or `goldens/demo-smoke` outside the
    repository). Unknown: the path as given, so the loader names what is missing."""
    path = Path(name)
    if (path / GOLDEN).is_file() or path.is_dir():
        return path
    if len(path.parts) == 1 or (len(path.parts) == 2 and path.parts[0] == "goldens"):
        candidate = PACKAGED / path.name
        if (candidate / GOLDEN).is_file():
            return candidate
    return path


def save_margins(path: Path, margins: Mapping[str, Margin]) -> None:
    """Write `margins` into the golden at `path` (calibrate), everything else in golden.json unchanged."""
    golden = load(path)
    header = dataclasses.replace(golden.header, margins=dict(margins))
    safewrite.write_json(Path(path) / GOLDEN, header.to_json())
