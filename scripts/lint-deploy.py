#!/usr/bin/env python3
"""Checks the container files for what hadolint and `docker compose config` would flag, plus this
project's own rules. No Docker engine runs on the build machines, so this is what stands between
a broken Dockerfile or compose file and a user.

  scripts/lint-deploy.py                    check docker/Dockerfile and docker/compose.yaml
  scripts/lint-deploy.py --dockerfile F     check another Dockerfile (e.g. a test's bad one)
  scripts/lint-deploy.py --compose F --compose-dir D
                                            check another compose file, resolving its relative
                                            paths from D instead of F's directory
  scripts/lint-deploy.py --dump-compose     print the compose file as JSON, as read here

Prints one line per problem, "FILE:LINE: RULE: what is wrong and what to do", and exits 1 when
there is any (2 for bad usage). Only the Python standard library is used; the compose file is
read by a strict parser for the part of YAML compose files need, which refuses what it does not
understand, and is compared with PyYAML's reading when PyYAML is installed.
"""

import argparse
import glob
import json
import os
import re
import shlex
import sys

problems = []


def report(path, line, rule, message):
    problems.append((path, line, rule, message))


# ---------------------------------------------------------------------------------------------
# Dockerfile
# ---------------------------------------------------------------------------------------------

class Instruction:
    def __init__(self, line, keyword, args):
        self.line = line        # line number of the instruction's first line
        self.keyword = keyword  # upper case
        self.args = args        # the rest, continuation lines joined with a space


class Stage:
    def __init__(self, index, line, image, name):
        self.index = index
        self.line = line
        self.image = image
        self.name = name
        self.instructions = []


_parsed = {}


def parse_dockerfile(path):
    """The instructions of a Dockerfile (parsed once; syntax problems are reported once)."""
    if path not in _parsed:
        _parsed[path] = read_instructions(path)
    return _parsed[path]


def read_instructions(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    instructions = []
    i = 0
    in_directives = True
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if not stripped:
            in_directives = False
            i += 1
            continue
        if stripped.startswith("#"):
            if in_directives and re.match(r"#\s*escape\s*=", stripped):
                report(path, i + 1, "DF-syntax",
                       "an escape directive is not supported by this checker; keep the default \\")
            i += 1
            continue
        in_directives = False
        start = i
        text = stripped
        # Continuation lines; comment lines inside a continuation are dropped, as Docker does.
        while text.endswith("\\"):
            text = text[:-1].rstrip()
            i += 1
            while i < len(lines) and lines[i].strip().startswith("#"):
                i += 1
            if i >= len(lines):
                report(path, start + 1, "DF-syntax", "the file ends inside a continued line")
                break
            text += " " + lines[i].strip()
        i += 1
        m = re.match(r"([A-Za-z]+)\s*(.*)$", text)
        if not m:
            report(path, start + 1, "DF-syntax", "not an instruction: " + text[:40])
            continue
        keyword, args = m.group(1).upper(), m.group(2)
        if "<<" in args and re.search(r"<<-?\s*['\"]?[A-Za-z_]+", args) and keyword in ("RUN", "COPY"):
            report(path, start + 1, "DF-syntax",
                   "heredocs are not supported by this checker; use a script file")
        instructions.append(Instruction(start + 1, keyword, args))
    return instructions


def split_flags(args):
    """Leading --flag=value words of COPY/ADD/FROM/RUN, and the rest."""
    flags = {}
    words = args.split()
    rest = []
    for n, w in enumerate(words):
        if w.startswith("--"):
            key, _, value = w[2:].partition("=")
            flags[key] = value
        else:
            rest = words[n:]
            break
    return flags, rest


def exec_form(args):
    """The JSON array of an exec-form instruction, or None for the shell form."""
    text = args.strip()
    if not text.startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def image_pinned(image):
    """None when the image reference names a fixed version, else why not."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag, so it means :latest"
    tag = last.split(":", 1)[1]
    if tag == "latest":
        return "uses the :latest tag"
    if "$" in tag:
        return "takes its tag from a build argument, which this checker cannot see"
    return None


def dockerignore_patterns(path):
    patterns = []
    if not path or not os.path.isfile(path):
        return patterns
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:].strip()
            line = os.path.normpath(line.lstrip("/"))
            patterns.append((negate, pattern_regex(line)))
    return patterns


def pattern_regex(pattern):
    """A .dockerignore pattern (Go filepath.Match plus **) as a regular expression."""
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"  # any number of directories, none included
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.find("]", i)
            if end == -1:
                out += re.escape(c)
            else:
                # Go's [^...] negates like a regular expression's.
                out += "[" + pattern[i + 1:end].replace("\\", "\\\\") + "]"
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return re.compile("^" + out + "$")


def ignored(relpath, patterns):
    """Whether Docker leaves `relpath` (relative to the context) out of the build context: the
    last pattern matching the path or one of its parent directories decides."""
    parts = relpath.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for negate, regex in patterns:
        if any(regex.match(c) for c in candidates):
            result = not negate
    return result


def check_dockerfile(path, root, ignore_file):
    instructions = parse_dockerfile(path)
    patterns = dockerignore_patterns(ignore_file)
    stages = []
    for ins in instructions:
        if ins.keyword == "FROM":
            _, rest = split_flags(ins.args)
            image = rest[0] if rest else ""
            name = rest[2] if len(rest) >= 3 and rest[1].upper() == "AS" else None
            stages.append(Stage(len(stages), ins.line, image, name))
        elif not stages:
            if ins.keyword != "ARG":
                report(path, ins.line, "DF-syntax", ins.keyword + " before the first FROM")
            continue
        stages[-1].instructions.append(ins)
    if not stages:
        report(path, 1, "DF-syntax", "no FROM instruction")
        return
    names = {}
    for st in stages:
        earlier = {s.name for s in stages[:st.index] if s.name}
        if st.image in earlier:
            continue  # FROM a previous stage
        why = image_pinned(st.image)
        if why:
            report(path, st.line, "DF-pin",
                   f"FROM {st.image} {why}; pin a tag such as debian:bookworm-20250520")
        if st.name:
            names[st.name] = st
    final = stages[-1]
    build_stages = stages[:-1]
    if not build_stages:
        report(path, final.line, "DF-stages",
               "a single stage: build in a stage of its own so compilers stay out of the image")
    elif final.image != build_stages[0].image and final.image not in names:
        report(path, final.line, "DF-stages",
               f"the runtime stage is FROM {final.image} but the build stage is FROM "
               f"{build_stages[0].image}: the binary must run on the release it was linked on")

    for st in stages:
        check_stage(path, root, patterns, st, stages, st is final)

    # The image is built by the scripts the tests run, so the two cannot drift.
    build_runs = " ; ".join(i.args for s in build_stages for i in s.instructions if i.keyword == "RUN")
    for script in ("scripts/install-deps.sh", "scripts/build.sh"):
        if build_stages and script not in build_runs:
            report(path, build_stages[0].line, "DF-scripts",
                   f"the build stage does not run {script}; build with the scripts the tests "
                   f"run, not a recipe of its own")
    final_runs = [i for i in final.instructions if i.keyword == "RUN"]
    if not any(re.search(r"install-deps\.sh\s+--runtime\b", i.args) for i in final_runs):
        report(path, final.line, "DF-scripts",
               "the runtime stage does not run install-deps.sh --runtime; take its packages "
               "from the list the script keeps")
    check_install_script(root)


def check_stage(path, root, patterns, st, stages, is_final):
    counts = {}
    user = None          # (line, value) of the last USER
    entrypoint = None
    copied = set()       # destinations of COPY in this stage
    env = {}
    exposed = set()
    for ins in st.instructions:
        k = ins.keyword
        counts[k] = counts.get(k, 0) + 1
        if k == "USER":
            user = (ins.line, ins.args.strip())
        elif k == "ENTRYPOINT":
            entrypoint = ins
            if user is None and is_final:
                report(path, ins.line, "DF-user",
                       "ENTRYPOINT comes before any USER: set a non-root USER first")
        elif k == "WORKDIR":
            d = ins.args.strip().strip('"')
            if not d.startswith("/") and not d.startswith("$"):
                report(path, ins.line, "DF-workdir",
                       f"WORKDIR {d} is relative; use an absolute path")
        elif k == "ADD":
            _, rest = split_flags(ins.args)
            for src in rest[:-1]:
                if not re.match(r"(https?|git)://", src) and not src.startswith("git@"):
                    report(path, ins.line, "DF-add",
                           f"ADD {src}: use COPY for local files (ADD also unpacks archives)")
        elif k == "COPY":
            check_copy(path, root, patterns, ins, st, stages, copied)
        elif k == "RUN":
            check_run(path, ins)
        elif k == "ENV":
            text = ins.args.strip()
            if not text or "=" not in text.split(None, 1)[0]:
                report(path, ins.line, "DF-env",
                       "ENV KEY value is the legacy form; write ENV KEY=value")
            else:
                try:
                    for word in shlex.split(text):
                        key, _, value = word.partition("=")
                        env[key] = value
                except ValueError:
                    report(path, ins.line, "DF-env", "unbalanced quotes")
        elif k == "EXPOSE":
            for p in ins.args.split():
                exposed.add(p.split("/")[0])
        elif k == "STOPSIGNAL":
            if ins.args.strip() not in ("SIGTERM", "SIGINT", "15", "2"):
                report(path, ins.line, "DF-stopsignal",
                       f"STOPSIGNAL {ins.args.strip()}: the daemon stops gracefully on "
                       f"SIGTERM or SIGINT only")
        elif k == "MAINTAINER":
            report(path, ins.line, "DF-maintainer", "MAINTAINER is deprecated; use a LABEL")
        if k in ("ENTRYPOINT", "CMD"):
            if exec_form(ins.args) is None:
                hint = (" (it starts with [ but is not a JSON array of strings: quotes must be \")"
                        if ins.args.strip().startswith("[") else "")
                report(path, ins.line, "DF-exec-form",
                       f"{k} in shell form runs under /bin/sh -c, which does not pass SIGTERM "
                       f"on; use the exec form [\"...\"]{hint}")
    for k in ("ENTRYPOINT", "CMD", "HEALTHCHECK"):
        if counts.get(k, 0) > 1:
            report(path, st.line, "DF-duplicate",
                   f"{counts[k]} {k} instructions in one stage: only the last one counts")
    if not is_final:
        return
    if entrypoint is None:
        report(path, st.line, "DF-entrypoint", "the runtime stage has no ENTRYPOINT")
    if user is None:
        report(path, st.line, "DF-user", "the runtime stage runs as root: add USER <uid>:<gid>")
    else:
        line, value = user
        uid = value.split(":")[0]
        if uid in ("root", "0"):
            report(path, line, "DF-user", f"USER {value} is root; use a dedicated uid")
        elif not uid.isdigit():
            report(path, line, "DF-user",
                   f"USER {value}: give the numeric uid:gid, so runtimes that require a non-root "
                   f"user (Kubernetes runAsNonRoot) can check it")
        if entrypoint is not None and line > entrypoint.line:
            report(path, line, "DF-user", "USER comes after ENTRYPOINT; set it before")
    hc = [i for i in st.instructions if i.keyword == "HEALTHCHECK"]
    if not hc:
        report(path, st.line, "DF-healthcheck", "the runtime stage has no HEALTHCHECK")
    else:
        check_healthcheck(path, hc[-1], copied)
    listen = env.get("MCPMQTT_HTTP_LISTEN")
    if listen is not None:
        port = listen.rsplit(":", 1)[-1]
        if port not in exposed:
            report(path, st.line, "DF-expose",
                   f"MCPMQTT_HTTP_LISTEN={listen} but port {port} is not EXPOSEd")
        if listen.rsplit(":", 1)[0] in ("127.0.0.1", "localhost", "[::1]"):
            report(path, st.line, "DF-expose",
                   f"MCPMQTT_HTTP_LISTEN={listen} is loopback: nothing outside the container "
                   f"can reach it; listen on 0.0.0.0")
    elif not exposed:
        report(path, st.line, "DF-expose", "the runtime stage EXPOSEs no port")


def check_healthcheck(path, ins, copied):
    text = ins.args.strip()
    if text.upper() == "NONE":
        report(path, ins.line, "DF-healthcheck", "HEALTHCHECK NONE disables the health check")
        return
    m = re.search(r"\bCMD\s+(.*)$", text)
    if not m:
        report(path, ins.line, "DF-healthcheck", "HEALTHCHECK without CMD")
        return
    argv = exec_form(m.group(1))
    if argv is None:
        report(path, ins.line, "DF-healthcheck",
               "HEALTHCHECK CMD in shell form needs /bin/sh; use the exec form [\"...\"]")
        return
    prog = argv[0]
    if prog.startswith("/") and prog not in copied and not re.match(r"/(usr/)?s?bin/", prog):
        report(path, ins.line, "DF-healthcheck",
               f"HEALTHCHECK runs {prog}, which no COPY in this stage puts there")
    for opt in ("interval", "timeout", "start-period", "retries"):
        if "--" + opt not in text:
            report(path, ins.line, "DF-healthcheck",
                   f"HEALTHCHECK without --{opt}: say it rather than rely on Docker's default")


def check_copy(path, root, patterns, ins, st, stages, copied):
    flags, rest = split_flags(ins.args)
    argv = exec_form(ins.args[ins.args.find("["):]) if "[" in ins.args else None
    words = argv if argv is not None else rest
    if len(words) < 2:
        report(path, ins.line, "DF-copy", "COPY needs a source and a destination")
        return
    *sources, dest = words
    for s in sources:
        copied.add(dest if not dest.endswith("/") else dest + os.path.basename(s.rstrip("/")))
    if "from" in flags:
        src_stage = flags["from"]
        earlier = {s.name for s in stages[:st.index] if s.name}
        if src_stage in earlier or (src_stage.isdigit() and int(src_stage) < st.index):
            return
        if "/" in src_stage or ":" in src_stage:
            why = image_pinned(src_stage)
            if why:
                report(path, ins.line, "DF-pin", f"COPY --from={src_stage} {why}")
            return
        report(path, ins.line, "DF-copy", f"COPY --from={src_stage}: no earlier stage of that name")
        return
    for src in sources:
        rel = os.path.normpath(src.lstrip("/"))
        if rel == ".":
            continue
        matches = glob.glob(os.path.join(root, rel))
        if not matches:
            report(path, ins.line, "DF-copy",
                   f"COPY {src}: no such file in the build context ({root})")
            continue
        for m in matches:
            relm = os.path.relpath(m, root)
            if ignored(relm, patterns):
                report(path, ins.line, "DF-copy",
                       f"COPY {src}: {relm} is excluded by .dockerignore, so docker build "
                       f"cannot find it")


def check_run(path, ins):
    cmd = ins.args
    # Split the shell command into simple commands, keeping their order.
    parts = [p.strip() for p in re.split(r"&&|\|\||;|\|", cmd)]
    if re.match(r"cd\s", parts[0] if parts else ""):
        report(path, ins.line, "DF-cd", "RUN starts with cd; use WORKDIR")
    if re.search(r"(^|\s)sudo\s", cmd):
        report(path, ins.line, "DF-sudo", "sudo in RUN; the build runs as root already")
    if re.search(r"(^|[\s;&|])apt\s+(install|update|upgrade)", cmd):
        report(path, ins.line, "DF-apt", "use apt-get in scripts; apt has no stable interface")
    if re.search(r"apt-get\s+(-\S+\s+)*(upgrade|dist-upgrade)", cmd):
        report(path, ins.line, "DF-apt",
               "apt-get upgrade in an image: pin a newer base image tag instead")
    install_at = None
    update_at = None
    script_at = None
    clean_at = None
    for n, p in enumerate(parts):
        if re.search(r"apt-get\s+(-\S+\s+)*install\b", p):
            if install_at is None:
                install_at = n
            if not re.search(r"(\s-y\b|\s--yes\b|\s-[a-z]*y[a-z]*\b|\s--assume-yes\b)", p):
                report(path, ins.line, "DF-apt", "apt-get install without -y would wait for input")
            if "--no-install-recommends" not in p:
                report(path, ins.line, "DF-apt",
                       "apt-get install without --no-install-recommends pulls in packages "
                       "nobody asked for")
        if re.search(r"apt-get\s+(-\S+\s+)*update\b", p) and update_at is None:
            update_at = n
        if "install-deps.sh" in p and script_at is None:
            script_at = n
        if re.search(r"\brm\s+-[a-zA-Z]*r[a-zA-Z]*\s+(\S+\s+)*/var/lib/apt/lists/\*", p):
            clean_at = n
    if install_at is not None and (update_at is None or update_at > install_at):
        report(path, ins.line, "DF-apt",
               "apt-get install without apt-get update before it in the same RUN uses a "
               "stale (cached) package list")
    for what, at in (("apt-get install", install_at), ("install-deps.sh", script_at)):
        if at is not None and (clean_at is None or clean_at < at):
            report(path, ins.line, "DF-apt",
                   f"{what} without rm -rf /var/lib/apt/lists/* after it in the same RUN leaves "
                   f"the package lists in the layer")
    if re.search(r"(^|[\s;&|])(cmake\s+--build|make|ninja)(\s|$)", cmd):
        report(path, ins.line, "DF-scripts",
               "builds with a command of its own; use scripts/build.sh as the tests do")


def check_install_script(root):
    script = os.path.join(root, "scripts", "install-deps.sh")
    if not os.path.isfile(script):
        report(script, 1, "DF-scripts", "scripts/install-deps.sh is missing")
        return
    with open(script, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            code = line.split("#", 1)[0]
            if re.search(r"apt-get\s+(-\S+\s+)*install\b", code) and \
                    "--no-install-recommends" not in code:
                report(script, n, "DF-apt",
                       "apt-get install without --no-install-recommends (the image runs this)")


# ---------------------------------------------------------------------------------------------
# A strict reader for the YAML that compose files use
# ---------------------------------------------------------------------------------------------

class YamlError(Exception):
    def __init__(self, line, message):
        super().__init__(message)
        self.line = line


class Node:
    """A parsed value with the line it came from. kind: map, seq or scalar."""

    def __init__(self, kind, value, line, quoted=False):
        self.kind = kind
        self.value = value  # dict (str -> Node), list of Node, or a Python scalar
        self.line = line
        self.quoted = quoted

    def get(self, key):
        return self.value.get(key) if self.kind == "map" else None

    def plain(self):
        if self.kind == "map":
            return {k: v.plain() for k, v in self.value.items()}
        if self.kind == "seq":
            return [v.plain() for v in self.value]
        return self.value


AMBIGUOUS = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|"
                       r"True|TRUE|False|FALSE|Null|NULL|[0-9]+(:[0-5]?[0-9])+|0[0-7]+|0o[0-7]+|"
                       r"0x[0-9a-fA-F]+|[-+]?\.(inf|Inf|INF|nan|NaN|NAN))$")
INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+\.[0-9]*)([eE][-+]?[0-9]+)?$")


# Values YAML 1.1 and 1.2 readers disagree on, found while parsing: (line, message).
ambiguities = []


def resolve_plain(text, line):
    if AMBIGUOUS.match(text):
        ambiguities.append((line, f"unquoted {text} means different things to YAML 1.1 and 1.2 "
                                  f"readers (a boolean, a base-60 or octal number...); quote it"))
        return text
    if text in ("", "~", "null"):
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if INT.match(text):
        return int(text)
    if FLOAT.match(text) and re.search(r"[0-9]", text):
        return float(text)
    return text


def strip_comment(text):
    """The line without its comment ('#' at the start or after a space, outside quotes)."""
    quote = None
    for n, c in enumerate(text):
        if quote:
            if c == quote:
                if quote == "'" and n + 1 < len(text) and text[n + 1] == "'":
                    continue
                quote = None
            elif c == "\\" and quote == '"':
                continue
        elif c in "'\"" and (n == 0 or text[n - 1] in " \t[,:-"):
            quote = c
        elif c == "#" and (n == 0 or text[n - 1] in " \t"):
            return text[:n].rstrip()
    return text.rstrip()


def parse_quoted(text, line):
    """A quoted scalar at the start of text: (value, rest)."""
    q = text[0]
    out = ""
    n = 1
    while n < len(text):
        c = text[n]
        if q == "'" and c == "'":
            if n + 1 < len(text) and text[n + 1] == "'":
                out += "'"
                n += 2
                continue
            return out, text[n + 1:]
        if q == '"' and c == "\\":
            if n + 1 >= len(text):
                break
            e = text[n + 1]
            simple = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "/": "/", "0": "\0",
                      "r": "\r", " ": " "}
            if e in simple:
                out += simple[e]
                n += 2
                continue
            if e == "u" and re.match(r"[0-9a-fA-F]{4}", text[n + 2:n + 6]):
                out += chr(int(text[n + 2:n + 6], 16))
                n += 6
                continue
            raise YamlError(line, f"unsupported escape \\{e} in a double-quoted string")
        if q == '"' and c == '"':
            return out, text[n + 1:]
        out += c
        n += 1
    raise YamlError(line, "a quoted string does not end on its line (multi-line strings are "
                          "not supported by this checker)")


def parse_scalar(text, line):
    text = text.strip()
    if not text:
        return Node("scalar", None, line)
    if text[0] in "'\"":
        value, rest = parse_quoted(text, line)
        if rest.strip():
            raise YamlError(line, f"unexpected text after a quoted string: {rest.strip()}")
        return Node("scalar", value, line, quoted=True)
    if text[0] == "[":
        return parse_flow_seq(text, line)
    if text[0] in "{|>&*!%@`?":
        raise YamlError(line, f"'{text[0]}' starts a YAML construct this checker does not "
                              f"support (flow mapping, block scalar, anchor, alias, tag...); "
                              f"write it in block style")
    if re.search(r":(\s|$)", text):
        raise YamlError(line, f"a plain value contains ': ' ({text}); quote it")
    return Node("scalar", resolve_plain(text, line), line)


def parse_flow_seq(text, line):
    items = []
    n = 1
    while True:
        while n < len(text) and text[n] == " ":
            n += 1
        if n >= len(text):
            raise YamlError(line, "a [ list does not end on its line")
        if text[n] == "]":
            if text[n + 1:].strip():
                raise YamlError(line, "unexpected text after ]")
            return Node("seq", items, line)
        if text[n] in "'\"":
            value, rest = parse_quoted(text[n:], line)
            items.append(Node("scalar", value, line, quoted=True))
            n = len(text) - len(rest)
        else:
            m = re.match(r"[^,\]\[{}]*", text[n:])
            word = m.group(0).strip()
            if not word:
                raise YamlError(line, "nested or empty items in a [ list are not supported")
            items.append(Node("scalar", resolve_plain(word, line), line))
            n += m.end()
        while n < len(text) and text[n] == " ":
            n += 1
        if n < len(text) and text[n] == ",":
            n += 1
        elif n < len(text) and text[n] != "]":
            raise YamlError(line, "items of a [ list must be separated by commas")


# "key: value" or "key:": a quoted key, or a plain one that starts with no YAML indicator and
# holds no ':' or '#'.
KEY = re.compile(r"""^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s'"#\[\]{}&*!|>%@`?,:-][^:#]*?)"""
                 r"""\s*:(?:\s+|$)(.*)$""")


def parse_yaml(text):
    lines = []
    for n, raw in enumerate(text.split("\n"), 1):
        if "\t" in raw[:len(raw) - len(raw.lstrip(" \t"))]:
            raise YamlError(n, "a tab in the indentation; YAML indents with spaces only")
        content = strip_comment(raw)
        if not content.strip():
            continue
        if content.strip() in ("---", "..."):
            if lines or content.strip() == "...":
                raise YamlError(n, "more than one YAML document")
            continue
        indent = len(content) - len(content.lstrip(" "))
        lines.append([indent, content.strip(), n])
    if not lines:
        raise YamlError(1, "the file is empty")
    node, i = parse_block(lines, 0, lines[0][0])
    if i != len(lines):
        raise YamlError(lines[i][2], "unexpected indentation")
    return node


def parse_block(lines, i, indent):
    if lines[i][1] == "-" or lines[i][1].startswith("- "):
        return parse_seq(lines, i, indent)
    return parse_map(lines, i, indent)


def parse_map(lines, i, indent):
    result = {}
    first = lines[i][2]
    while i < len(lines) and lines[i][0] == indent:
        _, text, line = lines[i]
        if text == "-" or text.startswith("- "):
            raise YamlError(line, "a list item where a key was expected")
        m = KEY.match(text)
        if not m:
            raise YamlError(line, f"expected \"key: value\", found: {text}")
        key_text, rest = m.group(1), m.group(2)
        if key_text[0] in "'\"":
            key, _ = parse_quoted(key_text, line)
        else:
            key = key_text.strip()
        if key in result:
            raise YamlError(line, f"duplicate key {key} (first on line {result[key][1]}); "
                                  f"one of them would be silently ignored")
        i += 1
        if rest.strip():
            value = parse_scalar(rest, line)
        elif i < len(lines) and lines[i][0] > indent:
            value, i = parse_block(lines, i, lines[i][0])
        elif i < len(lines) and lines[i][0] == indent and \
                (lines[i][1] == "-" or lines[i][1].startswith("- ")):
            value, i = parse_seq(lines, i, indent)  # a list at the key's own indentation
        else:
            value = Node("scalar", None, line)
        result[key] = (value, line)
    if i < len(lines) and lines[i][0] > indent:
        raise YamlError(lines[i][2], "unexpected indentation (a value continued on the next "
                                     "line is not supported by this checker)")
    return Node("map", {k: v for k, (v, _) in result.items()}, first), i


def parse_seq(lines, i, indent):
    items = []
    first = lines[i][2]
    while i < len(lines) and lines[i][0] == indent and \
            (lines[i][1] == "-" or lines[i][1].startswith("- ")):
        _, text, line = lines[i]
        rest = text[1:].lstrip(" ")
        if not rest:
            i += 1
            if i < len(lines) and lines[i][0] > indent:
                value, i = parse_block(lines, i, lines[i][0])
            else:
                value = Node("scalar", None, line)
        elif KEY.match(rest):
            # "- key: value": a mapping whose first line shares the dash's line.
            col = indent + (len(text) - len(rest))
            lines[i] = [col, rest, line]
            value, i = parse_map(lines, i, col)
        else:
            value = parse_scalar(rest, line)
            i += 1
        items.append(value)
    if i < len(lines) and lines[i][0] > indent:
        raise YamlError(lines[i][2], "unexpected indentation")
    return Node("seq", items, first), i


# ---------------------------------------------------------------------------------------------
# compose
# ---------------------------------------------------------------------------------------------

TOP_KEYS = {"name", "services", "volumes", "networks", "secrets", "configs", "include", "models"}
SERVICE_KEYS = set("""annotations attach blkio_config build cap_add cap_drop cgroup cgroup_parent
command configs container_name cpu_count cpu_percent cpu_period cpu_quota cpu_rt_period
cpu_rt_runtime cpu_shares cpus cpuset credential_spec depends_on deploy develop
device_cgroup_rules devices dns dns_opt dns_search domainname driver_opts entrypoint env_file
environment expose extends external_links extra_hosts gpus group_add healthcheck hostname image
init ipc isolation labels label_file links logging mac_address mem_limit mem_reservation
mem_swappiness memswap_limit network_mode networks oom_kill_disable oom_score_adj pid pids_limit
platform ports post_start pre_stop privileged profiles provider pull_policy read_only restart
runtime scale secrets security_opt shm_size stdin_open stop_grace_period stop_signal storage_opt
sysctls tmpfs tty ulimits use_api_socket user userns_mode uts volumes volumes_from
working_dir""".split())
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval",
                    "disable"}
BUILD_KEYS = set("""context dockerfile dockerfile_inline args ssh cache_from cache_to
additional_contexts extra_hosts isolation labels network no_cache platforms privileged pull
secrets shm_size tags target ulimits entitlements provenance sbom""".split())
DEPENDS_KEYS = {"condition", "restart", "required"}
LOOPBACK = ("127.0.0.1", "::1", "[::1]")


def check_compose(path, base_dir, dockerfile_path, dockerfile_root):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        root = parse_yaml(text)
    except YamlError as e:
        report(path, e.line, "CO-yaml", str(e))
        return
    for line, message in ambiguities:
        report(path, line, "CO-yaml", message)
    try:
        import yaml  # optional: a second, independent reading
    except ImportError:
        yaml = None
    if yaml is not None and not ambiguities:
        try:
            theirs = yaml.safe_load(text)
        except yaml.YAMLError as e:
            report(path, 1, "CO-yaml", f"PyYAML cannot read the file: {e}")
            theirs = None
        if theirs is not None and theirs != root.plain():
            report(path, 1, "CO-yaml", "PyYAML reads the file differently from this checker; "
                                       "simplify the construct that differs")
    if root.kind != "map":
        report(path, root.line, "CO-structure", "the top level must be a mapping")
        return
    for key, node in root.value.items():
        if key == "version":
            report(path, node.line, "CO-structure",
                   "the top-level version key is obsolete (docker compose warns and ignores it)")
        elif key not in TOP_KEYS and not key.startswith("x-"):
            report(path, node.line, "CO-structure", f"unknown top-level key {key}")
    check_interpolation(path, root)
    services = root.get("services")
    if services is None or services.kind != "map" or not services.value:
        report(path, root.line, "CO-structure", "no services")
        return
    volumes = root.get("volumes")
    declared_volumes = set(volumes.value) if volumes is not None and volumes.kind == "map" else set()
    healthy = {}
    for name, svc in services.value.items():
        if svc.kind != "map":
            report(path, svc.line, "CO-structure", f"service {name} must be a mapping")
            continue
        healthy[name] = check_service(path, base_dir, name, svc, declared_volumes,
                                      dockerfile_path, dockerfile_root)
    for name, svc in services.value.items():
        if svc.kind == "map":
            check_depends(path, name, svc, healthy)
    for section in ("secrets", "configs"):
        sec = root.get(section)
        if sec is not None and sec.kind == "map":
            for sname, entry in sec.value.items():
                f = entry.get("file") if entry.kind == "map" else None
                if f is not None and isinstance(f.value, str):
                    check_path_exists(path, base_dir, f.value, f.line, f"{section}.{sname}.file")


def check_interpolation(path, node):
    if node.kind == "map":
        for v in node.value.values():
            check_interpolation(path, v)
    elif node.kind == "seq":
        for v in node.value:
            check_interpolation(path, v)
    elif isinstance(node.value, str):
        s = node.value.replace("$$", "")
        for m in re.finditer(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)", s):
            ref = m.group(1)
            if ref.startswith("{") and re.match(r"\{[A-Za-z_][A-Za-z0-9_]*(:?[-?])", ref):
                continue  # ${VAR:-default}, ${VAR-default}, ${VAR:?message}
            report(path, node.line, "CO-interpolation",
                   f"compose replaces ${ref} from the environment (empty when unset); give a "
                   f"default (${{NAME:-value}}) or write $$ for a literal $")


def check_path_exists(path, base_dir, rel, line, what):
    full = rel if os.path.isabs(rel) else os.path.join(base_dir, rel)
    if not os.path.exists(full):
        report(path, line, "CO-file", f"{what}: {rel} does not exist (relative to {base_dir})")
        return None
    return full


def check_service(path, base_dir, name, svc, declared_volumes, dockerfile_path, dockerfile_root):
    """Checks one service; returns whether it has a health check."""
    for key, node in svc.value.items():
        if key not in SERVICE_KEYS and not key.startswith("x-"):
            report(path, node.line, "CO-structure", f"services.{name}: unknown key {key}")
    image = svc.get("image")
    build = svc.get("build")
    if image is None and build is None:
        report(path, svc.line, "CO-image", f"services.{name} has neither image nor build")
    if image is not None:
        why = image_pinned(str(image.value))
        if why:
            report(path, image.line, "CO-image", f"services.{name}.image {image.value} {why}; "
                                                 f"pin a tag")
    built_dockerfile = None
    if build is not None:
        if build.kind == "scalar":
            context, dockerfile, bline = build.value, "Dockerfile", build.line
        else:
            for key, node in build.value.items():
                if key not in BUILD_KEYS:
                    report(path, node.line, "CO-structure", f"services.{name}.build: unknown key {key}")
            c = build.get("context")
            d = build.get("dockerfile")
            context = c.value if c is not None else "."
            dockerfile = d.value if d is not None else "Dockerfile"
            bline = build.line
        ctx = check_path_exists(path, base_dir, str(context), bline, f"services.{name}.build.context")
        if ctx is not None:
            built_dockerfile = check_path_exists(path, ctx, str(dockerfile), bline,
                                                 f"services.{name}.build.dockerfile")
            # docker build reads ignore patterns from the context's root (or from
            # <Dockerfile>.dockerignore), never from the Dockerfile's own directory.
            stray = os.path.join(os.path.dirname(built_dockerfile or ctx), ".dockerignore")
            if built_dockerfile and os.path.realpath(os.path.dirname(built_dockerfile)) != \
                    os.path.realpath(ctx) and os.path.exists(stray):
                report(path, bline, "CO-build",
                       f"{stray} is not read by docker build: the context is {ctx}; put "
                       f"the patterns in {os.path.join(ctx, '.dockerignore')}")
    if svc.get("network_mode") is not None and svc.get("network_mode").value == "host":
        report(path, svc.get("network_mode").line, "CO-ports",
               f"services.{name}: network_mode host puts every port on the host's interfaces")
    ports = svc.get("ports")
    if ports is not None:
        if ports.kind != "seq":
            report(path, ports.line, "CO-ports", f"services.{name}.ports must be a list")
        else:
            for p in ports.value:
                check_port(path, name, p)
    vols = svc.get("volumes")
    if vols is not None and vols.kind == "seq":
        for v in vols.value:
            check_volume(path, base_dir, name, v, declared_volumes)
    env_file = svc.get("env_file")
    if env_file is not None:
        files = env_file.value if env_file.kind == "seq" else [env_file]
        for f in files:
            if f.kind == "scalar" and isinstance(f.value, str):
                check_path_exists(path, base_dir, f.value, f.line, f"services.{name}.env_file")
    restart = svc.get("restart")
    if restart is not None and not re.match(r"^(no|always|unless-stopped|on-failure(:\d+)?)$",
                                            str(restart.value)):
        report(path, restart.line, "CO-structure",
               f"services.{name}.restart {restart.value}: one of no, always, on-failure[:N], "
               f"unless-stopped (quote no)")
    hc = svc.get("healthcheck")
    if hc is None:
        if built_dockerfile and dockerfile_has_healthcheck(built_dockerfile):
            return True
        report(path, svc.line, "CO-healthcheck",
               f"services.{name} has no healthcheck, so nothing can wait for it to be ready")
        return False
    if hc.kind != "map":
        report(path, hc.line, "CO-healthcheck", f"services.{name}.healthcheck must be a mapping")
        return False
    for key, node in hc.value.items():
        if key not in HEALTHCHECK_KEYS:
            report(path, node.line, "CO-structure", f"services.{name}.healthcheck: unknown key {key}")
    if hc.get("disable") is not None and hc.get("disable").value is True:
        report(path, hc.line, "CO-healthcheck", f"services.{name}: the healthcheck is disabled")
        return False
    test = hc.get("test")
    if test is None:
        report(path, hc.line, "CO-healthcheck", f"services.{name}.healthcheck has no test")
        return False
    if test.kind == "seq":
        argv = [t.value for t in test.value]
        for t in test.value:
            if not isinstance(t.value, str):
                report(path, t.line, "CO-healthcheck",
                       f"services.{name}.healthcheck.test: {t.value} is not a string; quote it")
        if not argv or argv[0] not in ("CMD", "CMD-SHELL", "NONE"):
            report(path, test.line, "CO-healthcheck",
                   f"services.{name}.healthcheck.test: a list must start with CMD or CMD-SHELL")
        elif argv[0] == "NONE":
            report(path, test.line, "CO-healthcheck", f"services.{name}: healthcheck test NONE")
            return False
        elif argv[0] == "CMD" and len(argv) > 1 and built_dockerfile and \
                str(argv[1]).startswith("/") and not re.match(r"/(usr/)?s?bin/", str(argv[1])):
            if str(argv[1]) not in dockerfile_destinations(built_dockerfile):
                report(path, test.line, "CO-healthcheck",
                       f"services.{name}.healthcheck runs {argv[1]}, which the Dockerfile does "
                       f"not put in the image")
    return True


def dockerfile_has_healthcheck(dockerfile):
    with open(dockerfile, encoding="utf-8") as f:
        return any(re.match(r"\s*HEALTHCHECK\s+(?!NONE)", line, re.I) for line in f)


def dockerfile_destinations(dockerfile):
    dests = set()
    for ins in parse_dockerfile(dockerfile):
        if ins.keyword == "COPY":
            _, rest = split_flags(ins.args)
            argv = exec_form(ins.args[ins.args.find("["):]) if "[" in ins.args else None
            words = argv if argv is not None else rest
            if len(words) >= 2:
                dests.add(words[-1])
    return dests


def check_port(path, name, p):
    if p.kind == "map":
        host_ip = p.get("host_ip")
        if host_ip is None or host_ip.value not in LOOPBACK:
            report(path, p.line, "CO-ports",
                   f"services.{name}.ports: published on every interface of the host; set "
                   f"host_ip: 127.0.0.1")
        return
    if p.kind != "scalar":
        report(path, p.line, "CO-ports", f"services.{name}.ports: not a port mapping")
        return
    if not p.quoted:
        report(path, p.line, "CO-ports",
               f"services.{name}.ports: quote {p.value}; unquoted, YAML 1.1 reads mappings such "
               f"as 8080:80 as base-60 numbers")
    text = str(p.value)
    m = re.match(r"^(\[[^\]]+\]|[0-9.]+):([0-9-]+):([0-9-]+)(/(tcp|udp))?$", text)
    if not m:
        if re.match(r"^[0-9-]+(:[0-9-]+)?(/(tcp|udp))?$", text):
            report(path, p.line, "CO-ports",
                   f"services.{name}.ports {text}: published on every interface of the host; "
                   f"write \"127.0.0.1:{text if ':' in text else text + ':' + text}\"")
        else:
            report(path, p.line, "CO-ports", f"services.{name}.ports {text}: not a port mapping")
        return
    if m.group(1) not in LOOPBACK:
        report(path, p.line, "CO-ports",
               f"services.{name}.ports {text}: published on {m.group(1)}; bind to 127.0.0.1 "
               f"and put a reverse proxy with TLS in front for remote clients")


def check_volume(path, base_dir, name, v, declared):
    if v.kind == "map":
        vtype = v.get("type")
        source = v.get("source")
        if source is None:
            return
        if vtype is not None and vtype.value == "bind":
            check_path_exists(path, base_dir, str(source.value), source.line,
                              f"services.{name}.volumes")
        elif vtype is not None and vtype.value == "volume" and source.value not in declared:
            report(path, source.line, "CO-volume",
                   f"services.{name}.volumes: named volume {source.value} is not declared under "
                   f"the top-level volumes")
        return
    text = str(v.value)
    parts = text.split(":")
    if len(parts) < 2:
        return  # an anonymous volume
    src = parts[0]
    if src.startswith((".", "/", "~")):
        if src.startswith(("./", "../")) or src in (".", ".."):
            check_path_exists(path, base_dir, src, v.line, f"services.{name}.volumes")
    elif src not in declared:
        report(path, v.line, "CO-volume",
               f"services.{name}.volumes: named volume {src} is not declared under the "
               f"top-level volumes")


def check_depends(path, name, svc, healthy):
    dep = svc.get("depends_on")
    if dep is None:
        return
    if dep.kind == "seq":
        for d in dep.value:
            if d.value not in healthy:
                report(path, d.line, "CO-depends", f"services.{name}.depends_on: no service {d.value}")
        report(path, dep.line, "CO-depends",
               f"services.{name}.depends_on as a list only waits for the containers to start; "
               f"use condition: service_healthy")
        return
    if dep.kind != "map":
        report(path, dep.line, "CO-depends", f"services.{name}.depends_on: list or mapping")
        return
    for target, entry in dep.value.items():
        if target not in healthy:
            report(path, entry.line, "CO-depends", f"services.{name}.depends_on: no service {target}")
            continue
        cond = entry.get("condition") if entry.kind == "map" else None
        if entry.kind == "map":
            for key, node in entry.value.items():
                if key not in DEPENDS_KEYS:
                    report(path, node.line, "CO-structure",
                           f"services.{name}.depends_on.{target}: unknown key {key}")
        if cond is None or cond.value != "service_healthy":
            report(path, entry.line, "CO-depends",
                   f"services.{name}.depends_on.{target}: use condition: service_healthy, or "
                   f"{name} may start before {target} is ready")
        elif not healthy[target]:
            report(path, entry.line, "CO-depends",
                   f"services.{name} waits for {target} to be healthy, but {target} has no "
                   f"healthcheck: it would never start")


# ---------------------------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=repo, help="the build context (default: the repository)")
    ap.add_argument("--dockerfile", help="default: ROOT/docker/Dockerfile")
    ap.add_argument("--dockerignore",
                    help="default: DOCKERFILE.dockerignore if it exists, else ROOT/.dockerignore")
    ap.add_argument("--compose", help="default: ROOT/docker/compose.yaml")
    ap.add_argument("--compose-dir", help="base of the compose file's relative paths "
                                          "(default: its directory)")
    ap.add_argument("--dump-compose", action="store_true",
                    help="print the compose file as JSON, as this checker reads it, and exit")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    dockerfile = args.dockerfile or os.path.join(root, "docker", "Dockerfile")
    compose = args.compose or os.path.join(root, "docker", "compose.yaml")
    ignore = args.dockerignore
    if ignore is None:
        # BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile first.
        specific = dockerfile + ".dockerignore"
        ignore = specific if os.path.isfile(specific) else os.path.join(root, ".dockerignore")
    for f in (dockerfile, compose):
        if not os.path.isfile(f):
            print(f"lint-deploy: {f}: no such file", file=sys.stderr)
            return 2
    if args.dump_compose:
        with open(compose, encoding="utf-8") as f:
            try:
                print(json.dumps(parse_yaml(f.read()).plain(), indent=2))
            except YamlError as e:
                print(f"{compose}:{e.line}: CO-yaml: {e}", file=sys.stderr)
                return 1
        return 0
    check_dockerfile(dockerfile, root, ignore)
    check_compose(compose, os.path.abspath(args.compose_dir or os.path.dirname(compose)),
                  dockerfile, root)
    for path, line, rule, message in problems:
        print(f"{path}:{line}: {rule}: {message}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
