"""The arithmetic fault: where a CEL value is undefined (docs/language.md).

Apart from :mod:`cesar.automata.arithmetic`, which is compiled (``cesar.build``): a compiled
module cannot define a subclass of a built-in exception.  Import it from either.
"""

from __future__ import annotations


class ArithmeticFault(ArithmeticError):
    """Division by zero, 64-bit overflow, an undefined power or a function outside its domain."""
