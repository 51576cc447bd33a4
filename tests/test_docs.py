"""The documentation site builds with ``mkdocs build --strict``, and stays whole.

Part of ``make test`` (the docs extra is in the Makefile's install line), so a broken
link or anchor, a page left out of the nav, a nav entry without its page, or an
included file that moved fails CI. The site is built once per module, offline (the
theme's fonts are off and no inventory is fetched), into a temporary folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 250


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strict into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, (
        "mkdocs build --strict failed (the docs extra: pip install -e '.[docs]'):\n"
        + result.stdout[-3000:] + result.stderr[-6000:])
    return out


@pytest.mark.slow
def test_cli_reference_lists_every_command(site: Path) -> None:
    import typer.main

    from kvlab.cli import app

    page = (site / "reference" / "cli" / "index.html").read_text()
    group = typer.main.get_command(app)
    names = list(getattr(group, "commands", {}))
    assert len(names) > 10, names
    missing = [name for name in names if f"kvlab {name}" not in page]
    assert not missing, f"the generated CLI reference lacks: {missing}"


@pytest.mark.slow
def test_experiment_guides_include_their_file(site: Path) -> None:
    for toml in sorted((ROOT / "experiments").glob("*.toml")):
        page = (site / "experiments" / toml.stem / "index.html").read_text()
        # the file's name = "..." line, as highlighted from the snippet include
        name = re.search(r'^name = "([^"]+)"', toml.read_text(), re.MULTILINE)
        assert name is not None, toml
        assert name.group(1) in page and "--8&lt;--" not in page, toml.name


@pytest.mark.slow
def test_api_page_renders_docstrings_without_sphinx_roles(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text()
    assert "run_experiment" in page and "KvlabError" in page
    assert not re.search(r":(mod|class|func|meth|attr|data):<code>", page)


@pytest.mark.slow
def test_site_fetches_no_web_fonts(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index


def test_every_experiment_has_a_guide() -> None:
    guides = {page.stem for page in (DOCS / "experiments").glob("*.md")}
    experiments = {toml.stem for toml in (ROOT / "experiments").glob("*.toml")}
    assert not experiments - guides, (
        f"write docs/experiments/<name>.md for: {sorted(experiments - guides)}")


def test_every_server_kind_has_a_page() -> None:
    from kvlab.servers.kinds import SERVER_KINDS

    missing = [kind for kind in SERVER_KINDS if not (DOCS / "servers" / f"{kind}.md").exists()]
    assert not missing, f"write docs/servers/<kind>.md for: {missing}"


def test_readme_fits_on_a_screen_and_points_at_real_pages() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = len(readme.splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: keep it to {README_MAX_LINES}, the rest goes in docs/")
    targets = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert targets, "the README points to no docs page"
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"the README links to missing files: {missing}"
