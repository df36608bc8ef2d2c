"""Installing Dynamo into the job's container before a Dynamo process starts (`dynamo.install`).

Every Dynamo step of a node runs the same preamble; a lock and a marker file make the
first one install and the others wait for it.  The image's Python prefix holds the
marker, so a container reused by a later step skips the install.  The install runs as
root inside the container (`ENROOT_REMAP_ROOT=yes` on the step).
"""

from __future__ import annotations

import shlex

from srtd.context import PlanContext

NVIDIA_INDEX = "https://pypi.nvidia.com"
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
    source = dyn.source
    if not dyn.install or source is None or not ctx.containerized:
        return None
    version = source.pypi or source.wheel
    if version is not None:
        pins = [f"ai-dynamo-runtime=={version}", f"ai-dynamo=={version}"]
        pip = ["pip", "install", "--break-system-packages", "--quiet", "--extra-index-url", NVIDIA_INDEX, *pins]
        install = f"echo {shlex.quote(f'Installing dynamo {version}')} && {shlex.join(pip)}"
        return _LOCKED.format(key=_key(version), skip=shlex.quote("dynamo already installed"), install=install)
    if source.git is not None and source.rev is not None:
        rev = source.sha or source.rev
        build = " && ".join(
            [
                f"echo {shlex.quote(f'Building dynamo from source ({rev})')}",
                "DYN_SRC=$(mktemp -d)",
                f'git -C "$DYN_SRC" init -q && git -C "$DYN_SRC" fetch -q --depth 1 {shlex.quote(source.git)} '
                f'{shlex.quote(rev)} && git -C "$DYN_SRC" checkout -q FETCH_HEAD',
                "pip install --break-system-packages --quiet maturin",
                '( cd "$DYN_SRC/lib/bindings/python" && maturin build --release -o "$DYN_SRC/wheels" )',
                'pip install --break-system-packages "$DYN_SRC"/wheels/ai_dynamo_runtime-*.whl',
                'pip install --break-system-packages "$DYN_SRC"',
            ]
        )
        return _LOCKED.format(key=_key(rev), skip=shlex.quote("dynamo already built"), install=build)
    return None


def _key(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
