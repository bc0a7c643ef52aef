#!/usr/bin/env python3
"""Linux-only calls in code the macOS build compiles.

No macOS machine builds here, so this is the check that keeps platform/posix, platform/macos,
cli and lib free of what macOS lacks (pipe2, prctl, pidfd, /proc, st_mtim, ...) outside
preprocessor branches macOS does not compile. A line is guarded when its branch excludes macOS:
`#if defined(__linux__)`, `#if !defined(__APPLE__)`, the `#else` of `#if defined(__APPLE__)` or
of `#if !defined(__linux__)`, or a feature test of a macro (`#if defined(SI_KERNEL)`). A line
that ends with the comment `// portability: compared, not opened` names a Linux path as data
(lib's list of roots refused as writable), which every system may hold. Prints one line per
finding, FILE:LINE: NAME: TEXT, and exits 1 if there is any.

    portability_check.py SOURCE_DIR
    portability_check.py --self-test      (the checker's own cases)
"""
import pathlib
import re
import sys

# What macOS does not have, as it appears in source.
FORBIDDEN = [
    (r"\bpipe2\s*\(", "pipe2"),
    (r"\bprctl\s*\(|\bPR_SET_\w+", "prctl"),
    (r"\bpidfd\w*|\bSYS_pidfd\w*", "pidfd"),
    (r"\bsyscall\s*\(|<sys/syscall\.h>", "syscall"),
    (r"\"/proc[/\"]", "/proc"),
    (r"\"/dev/shm", "/dev/shm"),
    (r"\.st_[amc]tim\b", "st_mtim"),
    (r"\bSOCK_(CLOEXEC|NONBLOCK)\b", "SOCK_CLOEXEC"),
    (r"\bposix_fallocate\s*\(|\bfallocate\s*\(", "fallocate"),
    (r"<sys/sysmacros\.h>|<sys/prctl\.h>|<linux/", "Linux header"),
    (r"\bl(list|get|set|remove)xattr\s*\(", "Linux xattr call"),
    (r"\bO_(PATH|TMPFILE|NOATIME)\b", "Linux open flag"),
    (r"\bSI_KERNEL\b", "SI_KERNEL"),
    (r"\bfdatasync\s*\(", "fdatasync"),
    (r"\b(epoll_\w+|signalfd|eventfd|inotify_\w+|memfd_create|close_range|getrandom|accept4|dup3|ppoll|statx|renameat2)\s*\(",
     "Linux call"),
]

SOURCES = ["platform/posix", "platform/macos", "cli", "lib"]
EXTRA = ["platform/windows/runner_unavailable.cpp"]

EXEMPT = re.compile(r"//\s*portability: compared, not opened\s*$")

DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def kind(directive, condition):
    """What an #if/#elif condition says about the systems its branch is compiled on."""
    condition = re.sub(r"\s+", "", condition)
    if directive == "ifdef":
        condition = "defined(" + condition + ")"
    elif directive == "ifndef":
        condition = "!defined(" + condition + ")"
    names = {"defined(__linux__)": "linux", "!defined(__linux__)": "not-linux",
             "defined(__APPLE__)": "apple", "!defined(__APPLE__)": "not-apple"}
    if condition in names:
        return names[condition]
    if re.fullmatch(r"defined\([A-Z][A-Z0-9_]*\)", condition):
        return "feature"  # compiled only where the macro exists: a feature test
    return "other"


def findings(path, shown):
    yield from scan(path.read_text(encoding="utf-8"), shown)


def scan(text, shown):
    # Each open #if is [guarded, apple_seen]: whether macOS never compiles the current branch,
    # and whether an earlier branch of the same chain was macOS's.
    stack = []
    in_block_comment = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw
        if in_block_comment:
            if "*/" not in line:
                continue
            line = line.split("*/", 1)[1]
            in_block_comment = False
        line = re.sub(r"/\*.*?\*/", "", line)
        if "/*" in line:
            line, in_block_comment = line.split("/*", 1)[0], True
        line = re.sub(r"//.*", "", line)
        directive = DIRECTIVE.match(line)
        if directive:
            name, condition = directive.group(1), directive.group(2)
            if name in ("if", "ifdef", "ifndef"):
                k = kind(name, condition)
                stack.append([k in ("linux", "not-apple", "feature"), k in ("apple", "not-linux")])
            elif name == "elif" and stack:
                k = kind("if", condition)
                stack[-1][0] = stack[-1][1] or k in ("linux", "not-apple", "feature")
                stack[-1][1] = stack[-1][1] or k in ("apple", "not-linux")
            elif name == "else" and stack:
                stack[-1][0] = stack[-1][1]
            elif name == "endif" and stack:
                stack.pop()
            continue
        if any(guarded for guarded, _ in stack) or EXEMPT.search(raw):
            continue
        for pattern, name in FORBIDDEN:
            if re.search(pattern, line):
                yield f"{shown}:{number}: {name}: {raw.strip()}"


# The checker's own cases: source text and the names it must report, in order.
SELF_TEST = [
    ("pipe2(fds, O_CLOEXEC);", ["pipe2"]),
    ("// pipe2( in a comment\n/* prctl( */ int x;", []),
    ("#if defined(__linux__)\npipe2(f, 0);\n#else\npipe(f);\n#endif", []),
    ("#if defined(__linux__)\nok();\n#else\nprctl(1);\n#endif", ["prctl"]),
    ("#if defined(__APPLE__)\nfsync(fd);\n#else\nfdatasync(fd);\n#endif", []),
    ("#if defined(__APPLE__)\nx();\n#elif defined(_WIN32)\ny();\n#else\nopen(\"/proc/self\");\n#endif", []),
    ("#if !defined(__linux__)\nreap();\n#else\nopendir(\"/proc\");\n#endif", []),
    ("#ifdef _WIN32\nx();\n#else\nst.st_mtim.tv_sec;\n#endif", ["st_mtim"]),
    ("#if defined(SI_KERNEL)\nc != SI_KERNEL;\n#endif\nc == SI_KERNEL;", ["SI_KERNEL"]),
    ("#if defined(__linux__)\n#if defined(X)\na();\n#endif\nsyscall(1);\n#endif\nsyscall(2);", ["syscall"]),
    ("int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); st.st_mtimespec;", ["SOCK_CLOEXEC"]),
    ("trees = {\"/proc\", \"/dev\"};  // portability: compared, not opened\nopen(\"/proc/self\");", ["/proc"]),
    ("open(\"/proc/x\");  // portability: compared", ["/proc"]),
]


def self_test():
    failed = 0
    for text, expected in SELF_TEST:
        got = [finding.split(": ")[1] for finding in scan(text, "case")]
        if got != expected:
            failed += 1
            print(f"self-test: {text!r}: reported {got}, expected {expected}", file=sys.stderr)
    print(f"portability_check: self-test, {len(SELF_TEST)} cases, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = []
    for directory in SOURCES:
        files += sorted((root / directory).glob("*.[ch]pp"))
    files += [root / extra for extra in EXTRA]
    if not files or not all(f.is_file() for f in files):
        print(f"portability_check: sources not found under {root}", file=sys.stderr)
        return 2
    found = [f for path in files for f in findings(path, path.relative_to(root))]
    for line in found:
        print(line)
    print(f"portability_check: {len(files)} files, {len(found)} Linux-only uses in code macOS compiles",
          file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
