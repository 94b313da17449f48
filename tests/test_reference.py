"""The README's spec reference is generated from the parameter declarations and is current."""

from pathlib import Path

import pytest

from jaxclear import reference, schema
from jaxclear import spec as specmod

ROOT = Path(__file__).resolve().parents[1]


def test_readme_spec_reference_is_current():
    text = (ROOT / "README.md").read_text()
    assert reference.rewrite(text) == text, "README spec reference is stale: run python -m jaxclear.reference README.md"


def test_every_declared_key_is_in_the_reference_and_every_default_validates():
    md = reference.markdown()
    for name in schema.mechanism_names():
        sch = specmod.schema(name)
        for path, p in sch.params.items():
            assert f"| `{p.key}` |" in md, path
        if getattr(schema.mechanism_module(name), "STRUCTURE", ()):  # a linkage needs its topology
            with pytest.raises(specmod.SpecError, match="links"):
                specmod.load({"model": {"mechanism": name}})
            continue
        spec = specmod.load({"model": {"mechanism": name}})  # the declared defaults are a valid spec
        assert spec["model"]["mechanism"] == name
