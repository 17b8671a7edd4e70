"""A request sequence: cases sent in order to one fresh instance of an engine (a server, a Runner), as the users of
one instance send them. llama.cpp's semantics make every request independent (a fresh sampler over its own
history), so each request is judged on its own: an engine whose instance carries state from one request to the
next (a prompt cache that changes what DRY reads) differs on a later request, and only there.

JSON (schema `dryz.requests/1`): {"schema": "dryz.requests/1", "requests": [case, ...], ["note"]}, each request a
`dryz.case/1` object (its own parameters, history and candidates). At least one request, at most MAX_REQUESTS.
`Request(sequence, index)` is one request of a sequence as the causes see it (dryz.causes): its case and the
prompts of the requests before it on the same instance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .case import Case, CaseError
from .errors import DryzError

REQUESTS_SCHEMA = "dryz.requests/1"
MAX_REQUESTS = 64


class RequestsError(ValueError, DryzError):
    """A request sequence (or its JSON) that dryz refuses, with a one-line reason."""


@dataclass(frozen=True)
class Requests:
    """Cases sent in order to one fresh instance."""
    requests: tuple
    note: str = field(default="", compare=False)

    def __post_init__(self):
        try:
            reqs = tuple(self.requests)
        except TypeError:
            raise RequestsError("requests must be a sequence of cases") from None
        if not reqs:
            raise RequestsError("a request sequence needs at least one request")
        if len(reqs) > MAX_REQUESTS:
            raise RequestsError(f"a request sequence has at most {MAX_REQUESTS} requests, not {len(reqs)}")
        if not all(isinstance(c, Case) for c in reqs):
            raise RequestsError("every request of a sequence is a Case")
        object.__setattr__(self, "requests", reqs)

    def __len__(self) -> int:
        return len(self.requests)

    def items(self) -> list["Request"]:
        """Each request with the ones before it (what a request's judgement and its causes read)."""
        return [Request(self, i) for i in range(len(self.requests))]

    def tokens(self) -> int:
        """Every request's history, counted: what the minimizer makes small (after the number of requests)."""
        return sum(len(c.history) for c in self.requests)

    def spelled(self) -> str:
        """The histories as symbols, in order: `abcabcz | abcdabcd`."""
        return " | ".join(c.symbols if c.vocab is None else f"<{len(c.history)} tokens>" for c in self.requests)

    # -- JSON ------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": REQUESTS_SCHEMA, "requests": [c.to_json() for c in self.requests]}
        if self.note:
            d["note"] = self.note
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))

    @classmethod
    def from_json(cls, d: Any) -> "Requests":
        if not isinstance(d, dict):
            raise RequestsError("a request sequence must be a JSON object")
        if d.get("schema") != REQUESTS_SCHEMA:
            raise RequestsError(f"unknown request sequence schema {d.get('schema')!r} (this dryz reads "
                                f"{REQUESTS_SCHEMA!r})")
        extra = sorted(set(d) - {"schema", "requests", "note", "spelled"})
        if extra:
            raise RequestsError(f"unknown request sequence field(s): {', '.join(extra)}")
        reqs = d.get("requests")
        if not isinstance(reqs, list):
            raise RequestsError("'requests' must be a list of cases")
        return cls(tuple(_request(i, c) for i, c in enumerate(reqs, 1)), note=str(d.get("note", "")))


def _request(i: int, c) -> Case:
    """Request i (counted from 1) from its JSON."""
    try:
        return Case.from_json(c)
    except CaseError as e:
        raise RequestsError(f"request {i}: {e}") from None


@dataclass(frozen=True)
class Request:
    """Request `index` of a sequence: what a cause of a difference on it may read (its case, and the prompts sent
    before it to the same instance)."""
    sequence: Requests
    index: int

    @property
    def case(self) -> Case:
        return self.sequence.requests[self.index]

    @property
    def earlier(self) -> tuple:
        """The histories (prompts) of the requests before this one, in order."""
        return tuple(c.history for c in self.sequence.requests[:self.index])

    def dumps(self) -> str:
        return json.dumps({"request": self.index, **self.sequence.to_json()}, separators=(", ", ": "))


def case_of(probe) -> Case:
    """The case a probe judges: a Case itself, or a request's case."""
    return probe.case if isinstance(probe, Request) else probe
