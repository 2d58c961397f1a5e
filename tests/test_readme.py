"""The README and docs/: their examples run against a live server, and their links resolve.

README's walkthrough runs verbatim (but for the port). A ```bash block in docs/ marked
``<!-- run -->`` runs the same way, in a directory of its own, and each comment right under a
command is that command's output, ``...`` standing for what varies. A block that talks to a
server must be run or say why not (``<!-- not run: reason -->``); a block marked
``<!-- NAME walkthrough -->`` or ``<!-- NAME example -->`` is run by ``tests/test_docs.py``,
which must name that marker.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
PACKAGE = ROOT / "snapshot_kernel"

FENCE = re.compile(r"^```[^\n]*\n.*?^```", re.S | re.M)
BASH_BLOCK = re.compile(r"(?:<!-- (walkthrough|run|not run: [^>]+|[a-z]+ (?:walkthrough|example)) -->\n)?"
                        r"```bash\n(.*?)```", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
SERVER = "127.0.0.1:8080"


def walkthrough():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- walkthrough -->\n```bash\n(.*?)```", text, re.S)
    assert match, "README.md has no walkthrough block"
    return match.group(1)


def bash_blocks(path):
    """(marker or None, script) for each ```bash block of a Markdown file."""
    return [(m.group(1), m.group(2)) for m in BASH_BLOCK.finditer(path.read_text(encoding="utf-8"))]


def examples():
    """The blocks of docs/ marked to run, as pytest params named page:number."""
    found = []
    for page in PAGES:
        runs = [script for marker, script in bash_blocks(page) if marker == "run"]
        found += [pytest.param(script, id=f"{page.name}:{n}") for n, script in enumerate(runs, 1)]
    return found


def steps(script):
    """Split a script into (command, expected output or None): a command is a line and its
    continuation lines; the comment lines right under it, if any, are its output."""
    result, lines = [], script.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        while command[-1].endswith("\\") and i < len(lines):
            command.append(lines[i])
            i += 1
        expected = []
        while i < len(lines) and lines[i].startswith("#"):
            expected.append(lines[i][2:] if lines[i].startswith("# ") else lines[i][1:])
            i += 1
        result.append(("\n".join(command), "\n".join(expected) if expected else None))
    return result


def output_pattern(expected):
    """A regex for an expected output: ``...`` (or ``…``) matches anything, any run of
    whitespace matches any run of whitespace (comments wrap where replies do not)."""
    parts = re.split(r"\.\.\.|…", expected.strip())
    literal = lambda part: r"\s+".join(re.escape(word) for word in part.split())
    edges = [(r"\s*" if part[:1].isspace() else "") + literal(part) + (r"\s*" if part[-1:].isspace() else "")
             for part in parts]
    return re.compile(".*?".join(edges), re.S)


def run_example(script, port, cwd):
    """Run a docs example against the server on port; return [(command, expected, output)]."""
    marked = []
    for n, (command, _) in enumerate(steps(script)):
        marked += [f"printf '\\n@@step {n}@@\\n'", command]
    program = "\n".join(marked).replace(SERVER, f"127.0.0.1:{port}")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", program], capture_output=True,
                         text=True, timeout=60, cwd=cwd, env=env)
    assert run.returncode == 0, run.stderr
    outputs = re.split(r"\n@@step \d+@@\n", run.stdout)[1:]
    return [(command, expected, output.strip()) for (command, expected), output in zip(steps(script), outputs)]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path):
    seen, found = {}, set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


@pytest.fixture
def server():
    env = dict(os.environ, SNAPSHOT_KERNEL_TOKEN="change-me")
    process = subprocess.Popen([sys.executable, "-m", "snapshot_kernel.main", "--bind", "127.0.0.1:0"],
                               env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, f"the server did not say where it listens: {line!r}"
        yield int(match.group(1))
    finally:
        process.kill()
        process.wait(10)


def test_the_walkthrough_works_verbatim(server):
    assert shutil.which("curl"), "the walkthrough needs curl on PATH"
    script = walkthrough().replace("127.0.0.1:8080", f"127.0.0.1:{server}")
    run = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert '"text/plain": "42"' in out and '"state_name": "base"' in out
    assert '"text/plain": "82"' in out and '"text/plain": "-41"' in out
    assert '"ename": "ZeroDivisionError"' in out and '"text": "partial\\n"' in out
    assert '{"states": ["initial", "base", "doubled", "negated"]}' in out
    assert '"exec_id": "nap"' in out and '{"interrupted": "nap"}' in out
    assert '"ename": "KeyboardInterrupt"' in out and '"text": "napping\\n"' in out
    assert '"ename": "TimeoutError"' in out
    assert '{"deleted": "negated"}' in out and "no state named 'negated'" in out
    assert '"status": "running", "location": "/executions/job"' in out
    assert '"status": "completed"' in out and '"state_name": "summed@3"' in out
    assert '"text/plain": "15"' in out
    assert ("<stdout>\nhi\n</stdout>\n<execute_result>\n41\n</execute_result>\n"
            "[new state 'state-2' (from 'base')]") in out
    assert out.rstrip().endswith('{"states": ["initial"]}')


@pytest.mark.parametrize("script", examples())
def test_a_docs_example_gives_the_output_it_shows(script, server, tmp_path):
    assert shutil.which("curl"), "the examples need curl on PATH"
    checked = 0
    for command, expected, output in run_example(script, server, tmp_path):
        if expected is not None:
            assert output_pattern(expected).fullmatch(output), \
                f"{command}\nshows:\n{expected}\nbut printed:\n{output}"
            checked += 1
    assert checked, "an example that shows no output checks nothing"


def test_every_example_that_talks_to_a_server_is_run_or_says_why_not():
    for path in [README] + PAGES:
        for marker, script in bash_blocks(path):
            if SERVER in script or "$SK" in script:
                assert marker, f"{path.name}: mark this block <!-- run --> or <!-- not run: why -->:\n{script}"
                if marker.endswith((" walkthrough", " example")) and marker != "walkthrough":
                    assert f'"{marker}"' in (ROOT / "tests" / "test_docs.py").read_text(), \
                        f"{path.name}: no test runs the block marked <!-- {marker} -->"
    assert examples(), "docs/ has no example marked <!-- run -->"


def test_the_output_pattern_matches_what_it_should():
    assert output_pattern('{"a": 1, "id": "..."}').fullmatch('{"a": 1, "id": "5f0c"}')
    assert output_pattern('<stdout>\nhi\n</stdout>').fullmatch("<stdout>\nhi\n</stdout>")
    assert output_pattern('{"a": [1,\n "b"]}').fullmatch('{"a": [1, "b"]}')
    assert not output_pattern('{"a": 1}').fullmatch('{"a": 2}')
    assert not output_pattern('{"a": 1}').fullmatch('{"a": 1} 404')


@pytest.mark.parametrize("path", [README] + PAGES, ids=lambda path: path.name)
def test_every_relative_link_points_to_a_file_and_heading_that_exist(path):
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name} links to {target}, which does not exist"
        if fragment:
            assert linked.suffix == ".md", f"{path.name} links to a heading in {target}"
            assert fragment in anchors(linked), \
                f"{path.name} links to {target}, but {linked.name} has no heading #{fragment}"


def test_the_readme_links_every_docs_page_and_stays_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for page in PAGES:
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


def test_the_layout_links_every_module():
    linked = {(ROOT / "docs" / target).resolve() for target in LINK.findall((ROOT / "docs" / "layout.md").read_text())}
    modules = {path.resolve() for path in PACKAGE.rglob("*.py")
               if path.name != "__init__.py" or path.parent == PACKAGE}
    assert sorted(map(str, modules - linked)) == [], "docs/layout.md does not name these modules"
