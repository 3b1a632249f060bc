"""perf.opencepcmp's OpenCEP patterns are compositebench's forms.

OpenCEP is not installed for the tests (the comparison imports it from a checkout); these
tests pin what cesar's side hands it: each form's OpenCEP shape names the same components,
negated alike, in the same nesting as the pattern text cesar compiles.
"""

from cesar.perf.compositebench import FORMS
from cesar.perf.opencepcmp import SHAPES


def spelled(node) -> str:
    """An OpenCEP shape written as cesar's pattern structure."""
    head, rest = node
    if head in ("SEQ", "AND", "OR"):
        return f"{head}({', '.join(spelled(part) for part in rest)})"
    return f"!({head[1:]} {rest})" if head.startswith("!") else f"{head} {rest}"


def test_every_form_has_its_opencep_shape_and_they_say_the_same():
    assert SHAPES.keys() == FORMS.keys()
    for form, structure in FORMS.items():
        assert spelled(SHAPES[form]) == structure, form
