"""One redaction layer for everything we write.

A hostile or careless server echoes what we send it: a whole header, the bare token of an
`Authorization: Bearer sk-...` header inside a 401 message, a token split across two stream chunks, or
the token with its `-` written as `\\u002d`. A `Redactor` is built once from the configured secrets (the
environment key and every `--header` value) and scrubs all of those forms:

- every secret's whole value and its token-like parts (the part after `Bearer `, any run of 8+ token
  characters such as `sk-...`);
- each character may appear literally, JSON-escaped (`\\u002d`, `\\/`, also double-escaped once a body
  string is itself JSON-encoded) or percent-encoded;
- stream chunks are also reassembled per JSON field (content, arguments, ...) so a token split across
  chunk boundaries is found in the concatenation and removed from every chunk that holds a piece of it.

API: `Redactor.from_config(cfg)`, `.text(s)`, `.obj(o)`, `.record(d)` (a journal record).
Split pieces are joined where the parser joins them (see `_leaves`); the journal writer also parses each
redacted record and masks its text wholesale if a secret still comes out of the parsed answer (journal.py).
Not covered: a secret the server re-encodes (base64, hex, reversed, ...) is not recognised.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

MASK = "***"
MIN_SECRET = 4
"""Shorter values are not scrubbed: masking every `ab` in a body would destroy the record, not protect it."""
MIN_PART = 8
PREFIX_MIN = 12
"""A prefix of a secret (of a whole value or of a token-like part) this long or longer is masked as the secret is,
as far as the text goes on agreeing with the secret: a BFCL tool name holding a key's first 20 characters gives
away 20 of them. Why 12: a vendor's fixed prefix (`sk-proj-`, `sk-ant-api03-` is 13) leaves few random characters
in it, but any 12 characters of a key's random part are ~70 bits an attacker no longer has to guess; shorter
fragments recur by chance in ordinary text (`Bearer sk-`), and masking them would blank answers, not keys.
Half the key was considered and not taken: for a 160-character key it lets 79 characters through."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-.~+/=]{%d,}" % MIN_PART)
_SCHEMES = re.compile(r"^(?:bearer|basic|token|apikey|api-key|key)\s+", re.I)
_BACKSLASH_MARK = re.compile(r"\\[uU/]")
_PERCENT_MARK = re.compile(r"%[0-9A-Fa-f]{2}")
"""Where an escaped form of a secret could begin in an encoded JSON line (see `Redactor.untouched`). Two patterns,
each with a one-character literal prefix the regex engine scans for quickly: one alternation of both is ~3x slower."""
_MAX_WALK = 200
"""Recursion bound for `obj` (hostile server info can nest arbitrarily)."""


def _parts(secret: str) -> set[str]:
    """The whole value plus each token-like part a server might echo on its own."""
    s = secret.strip()
    out = {s} if len(s) >= MIN_SECRET else set()
    rest = _SCHEMES.sub("", s)
    if len(rest) >= MIN_SECRET:
        out.add(rest)
    for piece in re.split(r"[\s,;:=]+", rest):
        if len(piece) >= MIN_PART:
            out.add(piece)
    out.update(_TOKEN_RUN.findall(rest))
    return out


_CREDENTIAL_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "authorization", "auth", "credential",
                     "credentials", "bearer", "cookie"}


def credential_key(k: Any) -> bool:
    """Whether a body key names a credential (`api_key`, `access_token`, `Authorization`, `clientSecret`...);
    `max_tokens` and `top_logprobs` do not."""
    if not isinstance(k, str):
        return False
    low = k.lower()
    return bool(_CREDENTIAL_WORDS & set(re.split(r"[-_. ]+", low))) or low.endswith(("apikey", "token", "secret", "password"))


def credential_values(o: Any, _depth: int = 0) -> list[str]:
    """Every string under a credential-named key of a JSON-like value (`--extra-body`), at any depth."""
    out: list[str] = []
    if _depth > _MAX_WALK:
        return out
    if isinstance(o, dict):
        for k, v in o.items():
            if credential_key(k):
                out.extend(_strings(v))
            else:
                out.extend(credential_values(v, _depth + 1))
    elif isinstance(o, list):
        for v in o:
            out.extend(credential_values(v, _depth + 1))
    return out


def _strings(o: Any) -> list[str]:
    if isinstance(o, str):
        return [o]
    if isinstance(o, dict):
        return [s for v in o.values() for s in _strings(v)]
    if isinstance(o, list):
        return [s for v in o for s in _strings(v)]
    return []


def mask_credentials(o: Any, _depth: int = 0) -> Any:
    """A copy with every value under a credential-named key replaced by the mask (what run.json keeps)."""
    if _depth > _MAX_WALK:
        return o
    if isinstance(o, dict):
        return {k: (MASK if credential_key(k) and v is not None else mask_credentials(v, _depth + 1)) for k, v in o.items()}
    if isinstance(o, list):
        return [mask_credentials(v, _depth + 1) for v in o]
    return o


def _hex(n: int, width: int) -> str:
    return "".join(f"[{h}{h.upper()}]" if h.isalpha() else h for h in f"{n:0{width}x}")


def _char_pattern(c: str) -> str:
    """One character in any of the encodings it may reach a file in: literal, `\\uXXXX` (escaped up to
    twice, as a body string inside a JSON record is), `%XX`, and `\\/`."""
    code = ord(c)
    alts = [re.escape(c)]
    if code < 0x10000:
        alts.append(r"\\{1,4}[uU]" + _hex(code, 4))
    if code < 0x80:
        alts.append("%" + _hex(code, 2))
    if c == "/":
        alts.append(r"\\{1,4}/")
    return "(?:" + "|".join(alts) + ")"


class Redactor:
    """Scrubs a fixed set of secrets from text and JSON-like objects."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        parts: set[str] = set()
        for s in secrets:
            if s:
                parts |= _parts(s)
        # Longest first so a whole value wins over its own parts.
        self.parts = sorted(parts, key=lambda p: (-len(p), p))
        # Each long part's shortest prefix that matters, and the parts it begins (a match is extended along them).
        self.prefixes: dict[str, list[str]] = {}
        for p in self.parts:
            if len(p) > PREFIX_MIN:
                self.prefixes.setdefault(p[:PREFIX_MIN], []).append(p)
        searched = self.parts + sorted(set(self.prefixes) - set(self.parts), key=lambda p: (-len(p), p))
        self._searched = searched
        self._escaped = (re.compile("|".join("".join(_char_pattern(c) for c in p) for p in searched))
                         if searched else None)
        # Each part as the journal's encoder spells it inside a JSON string (a `"` or `\\` in a secret is escaped).
        self._line_parts = sorted({json.dumps(p, ensure_ascii=False)[1:-1] for p in searched} | set(searched))

    @classmethod
    def from_config(cls, cfg: Any) -> "Redactor":
        """From an EndpointConfig-like object: its `api_key`, every header value and the base URL's query values."""
        headers = getattr(cfg, "headers", None) or {}
        return cls([getattr(cfg, "api_key", None), *headers.values(), *url_query_values(getattr(cfg, "base_url", None))])

    def __bool__(self) -> bool:
        return bool(self.parts)

    def spans(self, s: str) -> list[tuple[int, int]]:
        """Where `s` spells a secret, a part of one, or a prefix of one of PREFIX_MIN+ characters (extended as far
        as `s` goes on agreeing with the longest secret it begins): sorted, overlapping spans merged."""
        found: list[tuple[int, int]] = []
        for p in self._searched:
            if p not in s:
                continue
            longer = self.prefixes.get(p[:PREFIX_MIN], ()) if len(p) >= PREFIX_MIN else ()
            at = s.find(p)
            while at >= 0:
                end = at + len(p)
                for whole in longer:  # how far the text goes on spelling a secret this prefix begins
                    k = end - at
                    while k < len(whole) and at + k < len(s) and s[at + k] == whole[k]:
                        k += 1
                    end = max(end, at + k)
                found.append((at, end))
                at = s.find(p, at + 1)
        found.sort()
        merged: list[tuple[int, int]] = []
        for a, b in found:
            if merged and a < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        return merged

    def text(self, s: str) -> str:
        if not self.parts or not s:
            return s
        spans = self.spans(s)
        if spans:
            out, pos = [], 0
            for a, b in spans:
                out += [s[pos:a], MASK]
                pos = b
            s = "".join(out) + s[pos:]
        # Escaped forms only matter where an escape could be: skip the slow pattern on plain text.
        if ("\\" in s or "%" in s) and self._escaped is not None:  # None only without parts (returned above)
            s = self._escaped.sub(MASK, s)
        return s

    def obj(self, o: Any, _depth: int = 0) -> Any:
        """A copy of a JSON-like value with every string (keys included) scrubbed."""
        if not self.parts:
            return o
        if isinstance(o, str):
            return self.text(o)
        if _depth > _MAX_WALK:
            return MASK  # an object this deep is hostile anyway; never recurse without bound
        if isinstance(o, dict):
            return {self.text(k) if isinstance(k, str) else k: self.obj(v, _depth + 1) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [self.obj(v, _depth + 1) for v in o]
        return o

    def chunks(self, chunks: list[str]) -> list[str]:
        """Stream chunks with secrets removed, including ones split across chunk boundaries."""
        if not self.parts or not chunks:
            return chunks
        out = _scrub_split(self, list(chunks))
        return [self.text(c) for c in out]

    def record(self, d: dict[str, Any]) -> dict[str, Any]:
        """A journal record (Exchange.to_json()): chunks reassembled first, then every string."""
        return self.obj(self.record_streams(d)) if self.parts else d

    def record_streams(self, d: dict[str, Any]) -> dict[str, Any]:
        """The first half of `record`: the secrets split across stream chunks (or a body's logprob tokens) cut out
        where the parser rejoins them. What is left is `obj`'s walk, which `untouched` can show to be a no-op."""
        if not self.parts:
            return d
        d = dict(d)
        if isinstance(d.get("chunks"), list):
            d["chunks"] = self.chunks([c for c in d["chunks"] if isinstance(c, str)])
        if isinstance(d.get("body"), str):
            # One body, but its logprob tokens are pieces of the text too: a secret can span several.
            d["body"] = _scrub_split(self, [d["body"]])[0]
        return d

    def untouched(self, line: str) -> bool:
        """Whether `obj` would give back unchanged the value this JSON line encodes (encoded without ASCII escapes),
        so the line can be written as it is: one scan of the encoded line instead of a walk over every string.

        `text` changes a string only where a part is spelled literally (then the part, JSON-escaped as the encoder
        escapes each character on its own, is in the line) or through an escape form of `_char_pattern`: `\\u`/`\\U`
        (a backslash inside a string is `\\\\` in the line, still followed by the `u`), `\\/` or `%XX`. None of
        these in the line: no string of the value changes. False is only "maybe": the caller walks the value."""
        if not self.parts:
            return True
        if any(p in line for p in self._line_parts):
            return False
        return _BACKSLASH_MARK.search(line) is None and _PERCENT_MARK.search(line) is None

    def blank_texts(self, d: dict[str, Any]) -> dict[str, Any]:
        """A journal record whose parsed answer still spells a secret after `record` (a split no stream key
        covers): every string of its body and chunks but the structural ones (`type`, `role`, `finish_reason`...)
        becomes the mask. It does not rely on knowing where text sits; the answer is lost, the key is not written."""
        d = dict(d)

        def blank(raw: str) -> str:
            try:
                val = json.loads(raw) if raw and raw[0] in "{[" else None
            except (ValueError, RecursionError):
                val = None
            if val is None:
                return raw if raw == "[DONE]" else MASK
            return json.dumps(_blank(val, 0), ensure_ascii=False, separators=(",", ":"))

        if isinstance(d.get("chunks"), list):
            d["chunks"] = [blank(c) if isinstance(c, str) else c for c in d["chunks"]]
        if isinstance(d.get("body"), str):
            d["body"] = blank(d["body"])
        return d


_STRUCTURAL = {"type", "object", "role", "finish_reason", "stop_reason", "status", "model"}


def _blank(o: Any, depth: int) -> Any:
    if depth > _MAX_WALK:
        return MASK
    if isinstance(o, dict):
        return {k: (v if k in _STRUCTURAL and isinstance(v, str) else _blank(v, depth + 1)) for k, v in o.items()}
    if isinstance(o, list):
        return [_blank(v, depth + 1) for v in o]
    return MASK if isinstance(o, str) else o


TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "text")

StreamKey = tuple[str | int, ...]
"""Which concatenation a text piece belongs to (a choice's field, a tool call's argument, an event's delta...)."""
Leaf = tuple[StreamKey, dict[str, Any], str]
"""(stream key, the JSON object holding the piece, its key there)."""


def _leaves(o: Any) -> list[Leaf]:
    """(stream key, container, key) of every text piece stream reassembly concatenates: per choice the
    delta texts, each tool call's name and arguments, and the logprob tokens in order.

    A piece may sit in several streams: the one its own index names, and the one the parser actually joins
    (parse.py appends every chat choice's delta to one answer whatever its `index`; the surface adapters (surfaces/) join a
    Messages block's `content_block_start` text with its deltas, and Responses text deltas across
    `output_index`). A secret split where the parser rejoins it is found where the parser rejoins it."""
    out: list[Leaf] = []
    t = o.get("type") if isinstance(o, dict) else None
    if isinstance(t, str):  # Responses / Messages stream events: their text deltas are joined per item / block
        d = o.get("delta")
        if t.endswith(".delta") and isinstance(d, str):
            out.append((("event", t, str(o.get("output_index", 0))), o, "delta"))
            out.append((("event", t), o, "delta"))
        elif t == "content_block_delta" and isinstance(d, dict):
            for f in ("text", "thinking", "partial_json"):
                if isinstance(d.get(f), str):
                    out.append((("event", str(o.get("index", 0)), f), d, f))
                    out.append((("event", f), d, f))
        elif t == "content_block_start" and isinstance(o.get("content_block"), dict):
            b = o["content_block"]
            for f in ("text", "thinking"):
                if isinstance(b.get(f), str):
                    out.append((("event", str(o.get("index", 0)), f), b, f))
                    out.append((("event", f), b, f))
    choices = o.get("choices") if isinstance(o, dict) else None
    for ci, ch in enumerate(choices if isinstance(choices, list) else ()):
        if not isinstance(ch, dict):
            continue
        d = next((ch[k] for k in ("delta", "message") if isinstance(ch.get(k), dict)), ch)
        for f in TEXT_FIELDS:
            if isinstance(d.get(f), str):
                out.extend((((ci, f), d, f), (("choices", f), d, f)))
        for tc in d.get("tool_calls") or () if isinstance(d.get("tool_calls"), list) else ():
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                idx = tc.get("index", 0)
                out.extend(((ci, "tool", str(idx), f), fn, f) for f in ("name", "arguments") if isinstance(fn.get(f), str))
                out.extend((("choices", "tool", str(idx), f), fn, f) for f in ("name", "arguments") if isinstance(fn.get(f), str))
        lp = ch.get("logprobs")
        toks = lp.get("content") if isinstance(lp, dict) else None
        if isinstance(toks, list):
            out += _logprob_leaves(toks, (ci, "logprobs"))
            out += _logprob_leaves(toks, ("choices", "logprobs"))
    if isinstance(t, str) and isinstance(o.get("logprobs"), list):  # a Responses text delta's own logprobs
        out += _logprob_leaves(o["logprobs"], ("event", "logprobs"))
    output = o.get("output") if isinstance(o, dict) else None
    if isinstance(o, dict) and isinstance(o.get("response"), dict):  # response.completed and kin carry the response
        output = o["response"].get("output")
    for item in output if isinstance(output, list) else ():  # a Responses body: output[].content[].logprobs
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and isinstance(part.get("logprobs"), list):
                out += _logprob_leaves(part["logprobs"], ("output", "logprobs"))
    return out


def _logprob_leaves(entries: list[Any], stream: StreamKey) -> list[Leaf]:
    """The token strings of logprob entries as text pieces: the chosen tokens in order (`stream`), and the
    alternatives of each rank in order (`stream` + rank): a server that echoes a key with logprobs on spells it
    in its tokens, and in its top_logprobs read position by position, though no one string holds it."""
    out: list[Leaf] = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("token"), str):
            out.append((stream, e, "token"))
        tops = e.get("top_logprobs")
        for rank, alt in enumerate(tops if isinstance(tops, list) else ()):
            if isinstance(alt, dict) and isinstance(alt.get("token"), str):
                out.append((stream + ("top", rank), alt, "token"))
    return out


def _scrub_split(r: Redactor, chunks: list[str]) -> list[str]:
    """Concatenate each string field across chunks (as stream reassembly does), find secrets in the
    concatenation, and cut every piece of a match out of the chunk that carried it."""
    parsed: list[Any] = []
    streams: dict[StreamKey, list[tuple[int, dict[str, Any], str]]] = {}  # (chunk index, object, key) per stream
    for i, c in enumerate(chunks):
        try:
            val = json.loads(c) if c and c[0] in "{[" else None
        except (ValueError, RecursionError):
            val = None
        parsed.append(val)
        if val is None:
            continue
        for path, cont, key in _leaves(val):
            streams.setdefault(path, []).append((i, cont, key))
    # Every stream is searched on the texts as received, then every cut is made: a stream that finds only a prefix
    # of a secret (one choice's half) must not cut it before a stream that joins more finds the whole.
    cuts: dict[tuple[int, Any], tuple[int, Any, Any, list[tuple[int, int, bool]]]] = {}  # by (container, key)
    for pieces in streams.values():
        if len(pieces) < 2:
            continue
        joined = "".join(cont[key] for _, cont, key in pieces)
        spans = r.spans(joined)
        if not spans:
            continue
        pos = 0
        for i, cont, key in pieces:
            s = cont[key]
            start = pos
            pos += len(s)
            local = _overlaps(start, len(s), spans)
            if local:
                cuts.setdefault((id(cont), key), (i, cont, key, []))[3].extend(local)
    dirty: set[int] = set()
    for i, cont, key, local in cuts.values():
        cont[key] = _cut(cont[key], local)
        dirty.add(i)
    return [json.dumps(parsed[i], ensure_ascii=False, separators=(",", ":")) if i in dirty else c
            for i, c in enumerate(chunks)]


def _overlaps(start: int, length: int, spans: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """The parts of a piece (at offset `start` of the concatenation, `length` long) that spans cover, in the piece's
    own positions, each with whether a match begins in it."""
    out = []
    for a, b in spans:
        lo, hi = max(a, start), min(b, start + length)
        if lo < hi:
            out.append((lo - start, hi - start, a >= start))
    return out


def _cut(s: str, local: list[tuple[int, int, bool]]) -> str:
    """Mask the covered parts of `s`: the piece holding a match's first character gets the mask, later pieces just
    lose their part."""
    keep = list(s)
    for lo, hi, begins in local:
        for j in range(lo, hi):
            keep[j] = ""
    for lo, hi, begins in local:
        if begins:
            keep[lo] = MASK
    return "".join(keep)


def url_query_values(url: str | None) -> list[str]:
    """The credentials in a URL's query (`?api_key=K`, `?sig=<long opaque value>`): sent with every request, and a
    server may echo them. A credential-named key's value, or any value of 16+ characters without spaces; not
    `?format=json` or `?api-version=2024-02-01`, which masked everywhere would blank ordinary words."""
    from urllib.parse import parse_qsl, urlsplit

    if not url:
        return []
    try:
        pairs = parse_qsl(urlsplit(url).query, keep_blank_values=False)
    except ValueError:
        return []
    return [v for k, v in pairs if credential_key(k) or (len(v) >= 16 and not any(c.isspace() for c in v))]
