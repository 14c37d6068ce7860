"""GorillaFileSystem: an in-memory directory tree with a current directory and shell-like commands.

Owns: the tree (directories holding files and directories), the current directory, and the commands the function
docs list (ls, cd, pwd, mkdir, touch, echo, cat, find, wc, sort, grep, du, tail, diff, mv, rm, rmdir, cp). Paths are
local to the current directory, one level at a time (the docs say so); `cd` and `find` also take "/", ".", "..".
Comparable state: the tree (names and contents), as BFCL's checker compares it; the current directory is not.
"""

from __future__ import annotations

from typing import Any

from .long_context import get as padding_get
from ._base import Config, Result, Simulator, error

INVALID_NAME_CHARS = set('|/\\?%*:"><')
MAX_DEPTH = 64
"""Directories nest at most this deep: a hostile model looping mkdir+cd must not make snapshots recurse without end."""
MAX_NODES = 20_000
"""Files plus directories in the tree at most: repeated `cp` of a directory grows the tree geometrically."""
MAX_CHARS = 16_000_000
"""Characters of file content in the tree at most (copies share strings in memory, but not in state snapshots)."""


class File:
    def __init__(self, name: str, content: str = "") -> None:
        self.name = name
        self.content = content

    def snapshot(self) -> Result:
        return {"type": "file", "content": self.content}


class Directory:
    def __init__(self, name: str, parent: Directory | None = None) -> None:
        self.name = name
        self.parent = parent
        self.contents: dict[str, File | Directory] = {}

    def snapshot(self) -> Result:
        return {"type": "directory", "contents": {n: item.snapshot() for n, item in self.contents.items()}}

    def adopt(self, name: str, item: File | Directory) -> None:
        item.name = name
        if isinstance(item, Directory):
            item.parent = self
        self.contents[name] = item


def _clone(item: File | Directory, parent: Directory | None) -> File | Directory:
    if isinstance(item, File):
        return File(item.name, item.content)
    out = Directory(item.name, parent)
    for name, child in item.contents.items():
        out.contents[name] = _clone(child, out)
    return out


def _count(item: File | Directory) -> int:
    return 1 + (sum(_count(c) for c in item.contents.values()) if isinstance(item, Directory) else 0)


def _chars(item: File | Directory) -> int:
    if isinstance(item, File):
        return len(item.content)
    return sum(_chars(c) for c in item.contents.values())


def _depth(directory: Directory) -> int:
    depth, node = 0, directory
    while node.parent is not None:
        depth, node = depth + 1, node.parent
    return depth


def _valid_name(name: str) -> bool:
    return bool(name) and not (set(name) & INVALID_NAME_CHARS)


class GorillaFileSystem(Simulator):
    CLASS_NAME = "GorillaFileSystem"
    DOC_FILE = "gorilla_file_system.json"
    STATE_FIELDS = ("root",)

    def __init__(self) -> None:
        super().__init__()
        self._root = Directory("/")
        self._cwd = self._root

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        """`root` holds exactly one top directory, which becomes the root (BFCL's layout); absent: an empty "/"."""
        self.long_context = long_context
        self._root = Directory("/")
        tree = config.get("root")
        if isinstance(tree, dict) and tree:
            top_name, top = next(iter(tree.items()))
            self._root = Directory(top_name)
            self._load(self._root, (top or {}).get("contents", {}))
        self._cwd = self._root

    def _load(self, directory: Directory, contents: dict[str, Any]) -> None:
        if _depth(directory) > MAX_DEPTH:  # a golden's tree: every later walk (find, du, state) recurses as deep
            raise ValueError(f"GorillaFileSystem: the initial tree nests deeper than {MAX_DEPTH} directories")
        has_subdir = False
        untouched = padding_get("FILES_TAIL_USED") if self.long_context else ()
        for name, spec in contents.items():
            if spec.get("type") == "directory":
                has_subdir = True
                sub = Directory(name, directory)
                directory.contents[name] = sub
                self._load(sub, spec.get("contents", {}))
            else:
                text = str(spec.get("content", ""))
                # Long context pads every file except those whose tail the questions ask about (BFCL's list).
                if self.long_context and name not in untouched:
                    text += padding_get("FILE_CONTENT_EXTENSION")
                directory.contents[name] = File(name, text)
        if self.long_context and not has_subdir:
            # Long context also fills each innermost directory with BFCL's many empty image files.
            for name in padding_get("POPULATE_FILE_EXTENSION"):
                directory.contents.setdefault(name, File(name))

    def state(self) -> Result:
        return {"root": {"name": self._root.name, **self._root.snapshot()}}

    # ---- helpers ----

    def _file(self, name: str) -> File | None:
        item = self._cwd.contents.get(name)
        return item if isinstance(item, File) else None

    def _resolve(self, path: str) -> Directory | None:
        """A directory by path from the current one ("/" = root, "." and ".." allowed); None if absent."""
        if path in ("", "."):
            return self._cwd
        node = self._root if path.startswith("/") else self._cwd
        for part in [p for p in path.split("/") if p]:
            if part == ".":
                continue
            if part == "..":
                node = node.parent or node
                continue
            nxt = node.contents.get(part)
            if not isinstance(nxt, Directory):
                return None
            node = nxt
        return node

    def _full(self, adding: int, adding_chars: int = 0) -> str | None:
        """Why `adding` more nodes holding `adding_chars` more characters would not fit, or None."""
        if _count(self._root) + adding > MAX_NODES:
            return f"No space left on device (at most {MAX_NODES} files and directories)"
        if adding_chars and _chars(self._root) + adding_chars > MAX_CHARS:
            return f"No space left on device (at most {MAX_CHARS} characters of content)"
        return None

    # ---- commands ----

    def pwd(self) -> Result:
        names = []
        node: Directory | None = self._cwd
        while node is not None:
            names.append(node.name)
            node = node.parent
        names = [n for n in reversed(names) if n != "/"]
        return {"current_working_directory": "/" + "/".join(names)}

    def ls(self, a: bool = False) -> Result:
        names = list(self._cwd.contents)
        if not a:
            names = [n for n in names if not n.startswith(".")]
        return {"current_directory_content": names}

    def cd(self, folder: str) -> Result:
        folder = folder.rstrip("/") or "/"
        if folder not in (".", "..", "/") and "/" in folder:
            return error(f"cd: {folder}: Unsupported path. Only one folder level at a time is supported.")
        if folder == "..":
            if self._cwd.parent is None:
                return error("Current directory is already the root. Cannot go back.")
            self._cwd = self._cwd.parent
            return {"current_working_directory": self._cwd.name}
        target = self._resolve(folder)
        if target is None:
            return error(f"cd: '{folder}': No such file or directory")
        self._cwd = target
        return {"current_working_directory": target.name}

    def mkdir(self, dir_name: str) -> Result:
        if not _valid_name(dir_name):
            return error(f"mkdir: cannot create directory '{dir_name}': Invalid character")
        if dir_name in self._cwd.contents:
            return error(f"mkdir: cannot create directory '{dir_name}': File exists")
        if _depth(self._cwd) >= MAX_DEPTH:
            return error(f"mkdir: cannot create directory '{dir_name}': too deeply nested (max {MAX_DEPTH})")
        if (full := self._full(1)) is not None:
            return error(f"mkdir: cannot create directory '{dir_name}': {full}")
        self._cwd.contents[dir_name] = Directory(dir_name, self._cwd)
        return {}

    def touch(self, file_name: str) -> Result:
        if not _valid_name(file_name):
            return error(f"touch: cannot touch '{file_name}': Invalid character")
        if file_name in self._cwd.contents:
            return error(f"touch: cannot touch '{file_name}': File exists")
        if (full := self._full(1)) is not None:
            return error(f"touch: cannot touch '{file_name}': {full}")
        self._cwd.contents[file_name] = File(file_name)
        return {}

    def echo(self, content: str, file_name: str | None = None) -> Result:
        """Without a file: the content back as terminal output. With one: overwrites an existing file (BFCL's echo
        does not create files; `touch` does)."""
        if file_name is None or file_name == "None" or file_name == "":
            return {"terminal_output": content}
        if not _valid_name(file_name):
            return error(f"echo: cannot write to '{file_name}': Invalid character")
        target = self._cwd.contents.get(file_name)
        if target is None:
            return error(f"echo: cannot write to '{file_name}': No such file")
        if not isinstance(target, File):
            return error(f"echo: cannot write to '{file_name}': Is a directory")
        if (full := self._full(0, len(content) - len(target.content))) is not None:
            return error(f"echo: cannot write to '{file_name}': {full}")
        target.content = content
        return {}

    def cat(self, file_name: str) -> Result:
        if not _valid_name(file_name):
            return error(f"cat: '{file_name}': Invalid character")
        item = self._cwd.contents.get(file_name)
        if item is None:
            return error(f"cat: '{file_name}': No such file or directory")
        if isinstance(item, Directory):
            return error(f"cat: '{file_name}': Is a directory")
        return {"file_content": item.content}

    def find(self, path: str = ".", name: str | None = None) -> Result:
        start = self._resolve(path)
        if start is None:
            return error(f"find: '{path}': No such file or directory")
        matches: list[str] = []

        def walk(directory: Directory, base: str) -> None:
            for item_name, item in directory.contents.items():
                item_path = f"{base}/{item_name}"
                if name is None or name in item_name:
                    matches.append(item_path)
                if isinstance(item, Directory):
                    walk(item, item_path)

        walk(start, path.rstrip("/"))
        return {"matches": matches}

    def wc(self, file_name: str, mode: str = "l") -> Result:
        if mode not in ("l", "w", "c"):
            return error(f"wc: invalid mode '{mode}'")
        f = self._file(file_name)
        if f is None:
            return error(f"wc: {file_name}: No such file or directory")
        if mode == "l":
            return {"count": len(f.content.splitlines()), "type": "lines"}
        if mode == "w":
            return {"count": len(f.content.split()), "type": "words"}
        return {"count": len(f.content), "type": "characters"}

    def sort(self, file_name: str) -> Result:
        f = self._file(file_name)
        if f is None:
            return error(f"sort: {file_name}: No such file or directory")
        return {"sorted_content": "\n".join(sorted(f.content.splitlines()))}

    def grep(self, file_name: str, pattern: str) -> Result:
        f = self._file(file_name)
        if f is None:
            return error(f"grep: {file_name}: No such file or directory")
        return {"matching_lines": [line for line in f.content.splitlines() if pattern in line]}

    def du(self, human_readable: bool = False) -> Result:
        def size(item: File | Directory) -> int:
            if isinstance(item, File):
                return len(item.content.encode("utf-8"))
            return sum(size(c) for c in item.contents.values())

        total: float = size(self._cwd)
        if not human_readable:
            return {"disk_usage": f"{int(total)} bytes"}
        for unit in ("B", "KB", "MB", "GB", "TB"):
            if total < 1024:
                return {"disk_usage": f"{total:.2f} {unit}"}
            total /= 1024
        return {"disk_usage": f"{total:.2f} PB"}

    def tail(self, file_name: str, lines: int = 10) -> Result:
        f = self._file(file_name)
        if f is None:
            return error(f"tail: {file_name}: No such file or directory")
        if lines < 0:
            return error(f"tail: invalid number of lines: '{lines}'")
        all_lines = f.content.splitlines()
        return {"last_lines": "\n".join(all_lines[len(all_lines) - min(lines, len(all_lines)):])}

    def diff(self, file_name1: str, file_name2: str) -> Result:
        """Pairs lines by position and reports the pairs that differ ("- a\\n+ b"), BFCL's format, which its
        ground truth quotes; lines past the shorter file are not compared, as in BFCL."""
        f1, f2 = self._file(file_name1), self._file(file_name2)
        if f1 is None or f2 is None:
            return error(f"diff: {file_name1} or {file_name2}: No such file or directory")
        pairs = zip(f1.content.splitlines(), f2.content.splitlines())
        return {"diff_lines": "\n".join(f"- {a}\n+ {b}" for a, b in pairs if a != b)}

    def _move_or_copy(self, verb: str, source: str, destination: str) -> Result:
        item = self._cwd.contents.get(source)
        if item is None:
            return error(f"{verb}: cannot {_VERBS[verb]} '{source}': No such file or directory")
        if "/" in destination:
            return error(f"{verb}: path not allowed in destination. Provide only a file or directory name.")
        if verb == "cp" and (full := self._full(_count(item), _chars(item))) is not None:
            return error(f"cp: cannot copy '{source}': {full}")
        moved = item if verb == "mv" else _clone(item, None)
        dest = self._cwd.contents.get(destination)
        if dest is not None and not isinstance(dest, Directory):
            return error(f"{verb}: cannot {_VERBS[verb]} '{source}' to '{destination}': Not a directory")
        if isinstance(dest, Directory):
            if dest is item:
                return error(f"{verb}: cannot {_VERBS[verb]} '{source}' into itself")
            if source in dest.contents:
                return error(f"{verb}: cannot {_VERBS[verb]} '{source}' to '{destination}/{source}': File exists")
            if verb == "mv":
                del self._cwd.contents[source]
            dest.adopt(source, moved)
            return {"result": f"'{source}' {_DONE[verb]} to '{destination}/{source}'"}
        if not _valid_name(destination):
            return error(f"{verb}: cannot {_VERBS[verb]} '{source}' to '{destination}': Invalid character")
        if verb == "mv":
            del self._cwd.contents[source]
        self._cwd.adopt(destination, moved)
        return {"result": f"'{source}' {_DONE[verb]} to '{destination}'"}

    def mv(self, source: str, destination: str) -> Result:
        """Into an existing directory named `destination`, else a rename within the current directory."""
        return self._move_or_copy("mv", source, destination)

    def cp(self, source: str, destination: str) -> Result:
        """Into an existing directory named `destination`, else a copy under that name; directories deep-copied."""
        return self._move_or_copy("cp", source, destination)

    def rm(self, file_name: str) -> Result:
        if file_name not in self._cwd.contents:
            return error(f"rm: cannot remove '{file_name}': No such file or directory")
        if self._cwd.contents[file_name] is self._cwd:
            return error(f"rm: cannot remove '{file_name}'")
        del self._cwd.contents[file_name]
        return {"result": f"'{file_name}' removed"}

    def rmdir(self, dir_name: str) -> Result:
        item = self._cwd.contents.get(dir_name)
        if item is None:
            return error(f"rmdir: cannot remove '{dir_name}': No such file or directory")
        if not isinstance(item, Directory):
            return error(f"rmdir: cannot remove '{dir_name}': Not a directory")
        if item.contents:
            return error(f"rmdir: cannot remove '{dir_name}': Directory not empty")
        del self._cwd.contents[dir_name]
        return {"result": f"'{dir_name}' removed"}


_VERBS = {"mv": "move", "cp": "copy"}
_DONE = {"mv": "moved", "cp": "copied"}
