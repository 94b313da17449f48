"""The README's spec reference, generated from the parameter declarations (``jaxclear.schema``).

``python -m jaxclear.reference README.md`` rewrites the block between the markers
``<!-- spec-reference:start -->`` and ``<!-- spec-reference:end -->``; ``tests/test_reference.py``
checks that the README is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import schema
from . import spec as specmod

START, END = "<!-- spec-reference:start -->", "<!-- spec-reference:end -->"
_NAMED = {"slider_crank": {"clearance_joint": "both"}, "four_bar": {"clearance_joint": "coupler_ends"}}


def markdown() -> str:
    """The spec reference of every built-in mechanism (common tables once, then each mechanism's own)."""
    out = [
        "Generated from the declarations (`python -m jaxclear.reference README.md`); every float of a",
        "sweepable table can be an axis or a `--set` override by its dotted path.",
        "",
        schema.reference_markdown([specmod.SWEEP, specmod.SAMPLING], title="Every spec"),
    ]
    for name in (
        "slider_crank",
        "four_bar",
        "impact_oscillator",
        "plate_compactor",
        "planet_pin",
        "rotor_two_bearings",
    ):
        sch = specmod.schema(name)
        own = [t for p, t in sch.decl.items() if p not in ("sweep", "sampling")]
        out.append(schema.reference_markdown(own, title=f'`model.mechanism = "{name}"`'))
        if name in _NAMED:
            multi = specmod.schema(name, _NAMED[name])
            extra = [t.path for p, t in multi.decl.items() if p not in sch.decl]
            out.append(
                f'With `clearance_joint = "{_NAMED[name]["clearance_joint"]}"` each clearance joint may '
                "override the float keys of `[joint]`, `[profile]` and `[laws]` in its own optional tables: "
                + ", ".join(f"`[{p}]`" for p in extra)
                + ".\n"
            )
    # the linkage's tables follow the spec's names: one of each, with placeholder names
    skel = {
        "points": {"<point>": {}},
        "links": {"<link>": {}},
        "bodies": {"<body>": {}},
        "joints": {"<joint>": {"type": "clearance"}},
    }
    sch = specmod.schema("linkage", {}, skel)
    own = [t for p, t in sch.decl.items() if p not in ("sweep", "sampling")]
    out.append(
        schema.reference_markdown(
            own,
            title='`model.mechanism = "linkage"` (one table per named point, link, '
            "body and joint; `<joint>` shown as a clearance joint)",
        )
    )
    return "\n".join(out).rstrip() + "\n"


def rewrite(text: str) -> str:
    """``text`` with the reference block replaced (ValueError if the markers are missing)."""
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"the markers {START} ... {END} are missing")
    return text[: i + len(START)] + "\n" + markdown() + text[j:]


def main(argv=None):
    path = Path((argv or sys.argv[1:] or ["README.md"])[0])
    path.write_text(rewrite(path.read_text()))


if __name__ == "__main__":
    main()
