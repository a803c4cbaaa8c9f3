"""The transition rules, one module per op family; ``protocol.rules.decide`` dispatches
to them. Invariant: pure, like all of ``protocol``: the rules read only the facts they
are handed and return effects as data."""
