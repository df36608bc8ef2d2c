"""Installing Dynamo into the job's container before a Dynamo process starts (`dynamo.install`).

What is installed: `dynamo.source` as written; srtctl's default release when the recipe
names none; Dynamo's head, built from git, with `dynamo.top_of_tree`.

Every Dynamo step of a node runs the same preamble; a lock and a marker file make the
first one install and the others wait for it.  The image's Python prefix holds the
marker, so a container reused by a later step skips the install.  The install runs as
root inside the container (`ENROOT_REMAP_ROOT=yes` on the step).
"""

from __future__ import annotations

import shlex

from srtd.context import PlanContext

NVIDIA_INDEX = "https://pypi.nvidia.com"
DYNAMO_GIT = "https://github.com/ai-dynamo/dynamo"
# What `dynamo.install` (on by default) installs when the recipe names no source: srtctl's
# DEFAULT_PYPI_VERSION, so a recipe without a `dynamo:` section launches the Dynamo srtctl's does.
DEFAULT_RELEASE = "0.8.0"
REMAP_ROOT = {"ENROOT_REMAP_ROOT": "yes"}  # pip writes into the image's site-packages

_LOCKED = (
    'DYN_PREFIX="$(python3 -c \'import sys; print(sys.prefix)\' 2>/dev/null || echo "${{HOME:-/root}}")"'
    ' && ( flock -x 200; if [ -f "$DYN_PREFIX/.srtd_dynamo_{key}.done" ]; then echo {skip};'
    ' else {{ {install} ; }} && touch "$DYN_PREFIX/.srtd_dynamo_{key}.done"; fi )'
    ' 200>"$DYN_PREFIX/.srtd_dynamo.lock"'
)


def install_preamble(ctx: PlanContext) -> str | None:
    """The shell that installs the recipe's Dynamo, or None when nothing is to be installed."""
    dyn = ctx.recipe.dynamo
    if not dyn.install or not ctx.containerized:
        return None
    if dyn.top_of_tree:
        return _build(DYNAMO_GIT, None)
    source = dyn.source
    if source is None:
        ctx.warn(
            f"dynamo: no `source` named, so every Dynamo step installs srtctl's default release {DEFAULT_RELEASE} "
            "first; say `dynamo.install: false` if the image ships Dynamo"
        )
    version = DEFAULT_RELEASE if source is None else source.pypi or source.wheel
    if version is not None:
        pins = [f"ai-dynamo-runtime=={version}", f"ai-dynamo=={version}"]
        pip = ["pip", "install", "--break-system-packages", "--quiet", "--extra-index-url", NVIDIA_INDEX, *pins]
        install = f"echo {shlex.quote(f'Installing dynamo {version}')} && {shlex.join(pip)}"
        return _LOCKED.format(key=_key(version), skip=shlex.quote("dynamo already installed"), install=install)
    if source is not None and source.git is not None and source.rev is not None:
        return _build(source.git, source.sha or source.rev)
    return None


def _build(repo: str, rev: str | None) -> str:
    """Build Dynamo from `repo` at `rev` (its default branch's head when None)."""
    ref = rev or "HEAD"
    what = rev or f"{repo} at HEAD"
    build = " && ".join(
        [
            f"echo {shlex.quote(f'Building dynamo from source ({what})')}",
            "DYN_SRC=$(mktemp -d)",
            f'git -C "$DYN_SRC" init -q && git -C "$DYN_SRC" fetch -q --depth 1 {shlex.quote(repo)} '
            f'{shlex.quote(ref)} && git -C "$DYN_SRC" checkout -q FETCH_HEAD',
            "pip install --break-system-packages --quiet maturin",
            '( cd "$DYN_SRC/lib/bindings/python" && maturin build --release -o "$DYN_SRC/wheels" )',
            'pip install --break-system-packages "$DYN_SRC"/wheels/ai_dynamo_runtime-*.whl',
            'pip install --break-system-packages "$DYN_SRC"',
        ]
    )
    # an unpinned head has no stable name: the marker says only that a build of the head is in
    key = _key(rev) if rev else "top_of_tree"
    return _LOCKED.format(key=key, skip=shlex.quote("dynamo already built"), install=build)


def _key(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
