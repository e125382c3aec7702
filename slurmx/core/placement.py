"""Where a variant may run: Slurm's `--constraint`, `--nodelist`, `--exclude` and `--exclusive`, as one value.

Why a value of its own: a policy that places a job on a node its user excluded, or one without the feature asked
for, makes Slurm refuse or park the start, and the group waits while the plan says it runs. Every placement rule is
decided here, once, for the simulator and the daemon alike (`Placement.admits`); a policy asks it of each node it
considers, or declares that it cannot (`policies/base.py`, `places_constraints`) and leaves such groups to one that
can (`cycle/handover.py`).

The constraint grammar is Slurm's for node features: names joined by `&` (and; `,` reads the same) and `|` (or), `&`
binding first (as Slurm reads it from 23.02; 22.05 read a mixed list left to right: write brackets there), grouped
by `( )` or `[ ]`, one level deep and one `[ ]` set at most, as Slurm allows. Slurm's `[a|b]` ("matching or": every
node of the job has the same one) is read as an or per node: the same for a one-node job, looser for a multi-node
one (said in docs/submit.md). Feature counts (`a*2`) and `!` are refused at submit time with a fix;
`parse_constraint` names the position.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["ANYWHERE", "ConstraintError", "Placement", "parse_constraint", "satisfies"]

_FEATURE = re.compile(r"[A-Za-z0-9_.:+-]+")
MAX_CONSTRAINT_CHARS = 1024  # a user's value: bounded before it is parsed (Slurm's own limit is larger)

# A parsed expression in disjunctive normal form: any of these sets of features, each needed whole.
_Dnf = tuple[frozenset[str], ...]


class ConstraintError(ValueError):
    """A `--constraint` value this grammar cannot read; the message names the position and the fix."""


@dataclass(frozen=True, slots=True)
class Placement:
    """The nodes a variant may take: those with the features `constraint` asks for, among `required` (all of them
    taken when given: Slurm's `-w`), never one of `excluded`, and a whole idle node each when `exclusive`."""

    constraint: str = ""
    required: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    exclusive: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "required", tuple(self.required))
        object.__setattr__(self, "excluded", tuple(self.excluded))
        if self.constraint:
            parse_constraint(self.constraint)  # refuse an unreadable value where the value is made

    @property
    def anywhere(self) -> bool:
        """No rule at all: every node of the variant's partition will do (most variants)."""
        return self is ANYWHERE or self == ANYWHERE

    def admits(self, name: str, features: Collection[str], idle: bool = True) -> bool:
        """Whether a node (its name, features, and whether nothing runs on it) may hold this variant."""
        if self.exclusive and not idle:
            return False
        if self.excluded and name in self.excluded:
            return False
        if self.required and name not in self.required:
            return False
        return not self.constraint or satisfies(self.constraint, frozenset(features))

    def describe(self) -> str:
        """One line for notes and `slurmx explain`: what the variant asked for."""
        parts = []
        if self.constraint:
            parts.append(f"features {self.constraint}")
        if self.required:
            parts.append(f"nodes {','.join(self.required)}")
        if self.excluded:
            parts.append(f"not {','.join(self.excluded)}")
        if self.exclusive:
            parts.append("whole nodes")
        return "; ".join(parts) or "anywhere"


ANYWHERE = Placement()


@functools.lru_cache(maxsize=4096)
def satisfies(constraint: str, features: frozenset[str]) -> bool:
    """Whether a node with `features` satisfies the expression (memoised: a cluster has few feature sets)."""
    return any(need <= features for need in _dnf(constraint))


@functools.lru_cache(maxsize=1024)
def _dnf(constraint: str) -> _Dnf:
    return parse_constraint(constraint)


def parse_constraint(text: str) -> _Dnf:
    """A constraint expression -> the feature sets any one of which satisfies it; ConstraintError naming the place."""
    if len(text) > MAX_CONSTRAINT_CHARS:
        raise ConstraintError(f"constraint longer than {MAX_CONSTRAINT_CHARS} characters; name fewer features")
    tokens = _tokens(text)
    _check_nesting(tokens, text)
    terms, at = _or(tokens, 0, text)
    if at != len(tokens):
        raise ConstraintError(f"constraint {text!r}: unexpected {tokens[at][0]!r} at character {tokens[at][1] + 1}; "
                              "write features joined by & (and) or | (or), grouped in ( )")
    return terms


def _tokens(text: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    at = 0
    while at < len(text):
        char = text[at]
        if char.isspace():
            at += 1
            continue
        if char in "&|,()[]":
            tokens.append(("&" if char == "," else char, at))
            at += 1
            continue
        found = _FEATURE.match(text, at)
        if found is None:
            hint = ("a feature count (name*N) is not supported; ask for the nodes with -N and the feature alone"
                    if char == "*" else "features are letters, digits and _ . : + -")
            raise ConstraintError(f"constraint {text!r}: {char!r} at character {at + 1}: {hint}")
        tokens.append((found.group(), at))
        at = found.end()
    if not tokens:
        raise ConstraintError("constraint is empty; leave the option out, or name a feature")
    return tokens


def _or(tokens: list[tuple[str, int]], at: int, text: str) -> tuple[_Dnf, int]:
    terms, at = _and(tokens, at, text)
    while at < len(tokens) and tokens[at][0] == "|":
        more, at = _and(tokens, at + 1, text)
        terms = _unique(terms + more)
    return terms, at


def _and(tokens: list[tuple[str, int]], at: int, text: str) -> tuple[_Dnf, int]:
    terms, at = _atom(tokens, at, text)
    while at < len(tokens) and tokens[at][0] == "&":
        more, at = _atom(tokens, at + 1, text)
        terms = _unique(tuple(a | b for a in terms for b in more))
        if len(terms) > 256:
            raise ConstraintError(f"constraint {text!r}: more than 256 alternatives; write it shorter")
    return terms, at


def _atom(tokens: list[tuple[str, int]], at: int, text: str) -> tuple[_Dnf, int]:
    if at >= len(tokens):
        raise ConstraintError(f"constraint {text!r} ends after an operator; name a feature after it")
    token, where = tokens[at]
    if token in ("(", "["):
        terms, at = _or(tokens, at + 1, text)
        if at >= len(tokens) or tokens[at][0] != _CLOSING[token]:
            raise ConstraintError(f"constraint {text!r}: the bracket at character {where + 1} is not closed")
        return terms, at + 1
    if token in ("&", "|", ")", "]"):
        raise ConstraintError(f"constraint {text!r}: {token!r} at character {where + 1} where a feature belongs")
    return (frozenset({token}),), at + 1


_CLOSING = {"(": ")", "[": "]"}


def _check_nesting(tokens: list[tuple[str, int]], text: str) -> None:
    """Slurm's own limits (build_feature_list): no bracket inside another, and one `[ ]` set at most; sbatch
    refuses the rest, so they are refused here in one line, before a script is written."""
    open_at: int | None = None
    brackets = 0
    for token, where in tokens:
        if token in ("(", "["):
            if open_at is not None:
                raise ConstraintError(f"constraint {text!r}: a bracket inside another at character {where + 1}; "
                                      "Slurm reads one level: write it without the inner one")
            open_at = where
            brackets += token == "["
            if brackets > 1:
                raise ConstraintError(f"constraint {text!r}: a second [ ] at character {where + 1}; Slurm reads "
                                      "one matching-or set per job")
        elif token in (")", "]"):
            open_at = None


def _unique(terms: _Dnf) -> _Dnf:
    return tuple(dict.fromkeys(terms))
