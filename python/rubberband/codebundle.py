"""A trainer's folder as a code bundle, as the Go CLI packs it (package trial/codebundle): every
regular file that .gitignore and .rbignore (the folder's own) do not leave out, .git and
.rubberband never, links skipped, at most 100 MiB; its ID is the sha256 of the manifest text
"rubberband-code-v1\\n" then "MODE SHA256 PATH\\n" per file in byte order of path (MODE 755 or
644), so the server names a folder packed here and by the CLI alike. Standard library only."""
import fnmatch
import gzip
import hashlib
import io
import os
import stat
import tarfile

MAX_BYTES = 100 << 20
MAX_FILES = 20000
IGNORE_FILES = (".gitignore", ".rbignore")
ALWAYS_LEFT_OUT = (".rubberband", ".git")
HEADER = "rubberband-code-v1\n"


class TooLarge(ValueError):
    """A folder over the caps; the message names its largest files and how to leave them out."""


def _patterns(folder):
    out = []
    for name in IGNORE_FILES:
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            line = line.rstrip(" \t\r")
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            elif line.startswith(("\\!", "\\#")):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if line:
                out.append((line, negate, dir_only, anchored))
    return out


def _glob(pat, name):
    while pat:
        if pat[0] == "**":
            rest = pat[1:]
            if not rest:
                return True
            return any(_glob(rest, name[i:]) for i in range(len(name) + 1))
        if not name or not fnmatch.fnmatchcase(name[0], pat[0]):
            return False
        pat, name = pat[1:], name[1:]
    return not name


def _ignored(patterns, rel, is_dir):
    if rel.rsplit("/", 1)[-1] in ALWAYS_LEFT_OUT:
        return True
    ignored = False
    for glob, negate, dir_only, anchored in patterns:
        if dir_only and not is_dir:
            continue
        if not anchored and "/" not in glob:
            hit = _glob([glob], [rel.rsplit("/", 1)[-1]])
        else:
            hit = _glob(glob.split("/"), rel.split("/"))
        if hit:
            ignored = not negate
    return ignored


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scan(folder, max_bytes=MAX_BYTES, max_files=MAX_FILES):
    """The files a bundle of folder holds: (path, executable, size, sha256) in path order."""
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        raise ValueError("trainer.workdir %s is not a folder" % folder)
    patterns = _patterns(folder)
    found = []
    for root, dirs, names in os.walk(folder):
        rel_root = os.path.relpath(root, folder).replace(os.sep, "/")
        rel_root = "" if rel_root == "." else rel_root + "/"
        keep = []
        for d in sorted(dirs):
            full = os.path.join(root, d)
            if not os.path.islink(full) and not _ignored(patterns, rel_root + d, True):
                keep.append(d)
        dirs[:] = keep
        for n in names:
            rel = rel_root + n
            full = os.path.join(root, n)
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode) or _ignored(patterns, rel, False):
                continue
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rel):
                raise ValueError("%s: a file name with a newline or control character cannot be sent" % rel)
            found.append((rel, bool(st.st_mode & 0o111), st.st_size))
    total = sum(f[2] for f in found)
    if total > max_bytes or len(found) > max_files:
        biggest = sorted(found, key=lambda f: -f[2])[:5]
        raise TooLarge(
            "trainer.workdir %s is too large to send with the run: %d files, %.1f MiB (at most %d files, %.1f MiB); the largest: %s. "
            "List what the trainer does not need (data, checkpoints, outputs) in %s, one pattern a line as in .gitignore (say `data/` or `*.pt`), "
            "or set trainer.workdir to a smaller folder"
            % (folder, len(found), total / 2**20, max_files, max_bytes / 2**20,
               ", ".join("%s (%.1f MiB)" % (p, s / 2**20) for p, _, s in biggest), os.path.join(folder, ".rbignore")))
    found.sort(key=lambda f: f[0].encode())
    return [(p, x, s, _sha256(os.path.join(folder, p))) for p, x, s in found]


def bundle_id(files):
    """The bundle's ID: the sha256 of its manifest text."""
    h = hashlib.sha256(HEADER.encode())
    for path, executable, _, digest in files:
        h.update(("%s %s %s\n" % ("755" if executable else "644", digest, path)).encode())
    return h.hexdigest()


def pack(folder, files):
    """The tar.gz of files (scan's) read from folder, with fixed times, owners and modes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=1) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, executable, size, digest in files:
                with open(os.path.join(folder, path), "rb") as f:
                    data = f.read()
                if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                    raise ValueError("%s changed while it was packed; submit again" % path)
                info = tarfile.TarInfo(path)
                info.size, info.mode, info.mtime = size, 0o755 if executable else 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
