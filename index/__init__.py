"""Predicate indices of the multi-query engine (Section 4.3 of the Cayuga paper).

A library of data structures that knows nothing of CEL: a predicate reaches
it as plain *atoms* ``(attribute, operator, constant)`` and events and
instances as mappings from attribute names to values.

* :mod:`cesar.index.ranges`: the atom vocabulary and :class:`RangeList`, the one
  ordered structure both indices answer ``key op value`` with;
* :mod:`cesar.index.static`: :class:`StaticIndex` (static conjuncts of one stream)
  and :class:`ConjunctIndex` (keys → their conjuncts, per stream), of which the
  engine's FR and AN indices are two instances, and :class:`AtomPool`, which
  shares each distinct atom among the conjuncts they hold;
* :mod:`cesar.index.ai`: :class:`InstanceIndex`, the AI index of one node's
  live instances by their bound values;
* :mod:`cesar.index.thresholds`: :class:`Thresholds`, items by a threshold
  each (an instance and a subscription's constant give one), probed with a
  value for those it passes.
"""
