"""Values the host reads back from the GPU where the capture cannot know them: what the user states, what
known library loops do, and the line each read is at.

A fake tensor holds no data, so `if flag:`, `while loss > tol:`, `x.item()` read a placeholder. Where the value
follows from host-known values (value hints, capture/dynamic_shapes.py) it is exact; where it does not, the
capture takes, in order:
1. the user's statement for that line (`--assume PATH:LINE=VALUE`, `assume=` in the Python API): one value, or
   a list read in turn (`train.py:40=True*9,False`: nine loop passes, then the exit), whose last value repeats;
2. a known library loop's value (LIBRARY_LOOP_READS): transformers' beam search continues until its
   host-known stopping criteria end it, as in a run where no beam finishes early;
3. the dtype's placeholder (the recorder's: bool by the op that made it, float 1.0, integer 1).
Each guess is a note with its line and how to state it.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass
from typing import Iterator

from kernelcast.errors import CaptureError, KernelcastError

Number = bool | int | float

# (file path suffix, function) -> (value, why): loops in libraries whose exit reads a GPU value that no value
# hint reaches. transformers' _beam_search reads `not _beam_search_has_unfinished_sequences(...)` each step:
# improvement still possible (scores: unknown here) & an open beam & the stopping criteria not all hit. The
# last is host-known (max_length), so with this value the loop ends where max_new_tokens ends it.
LIBRARY_LOOP_READS: dict[tuple[str, str], tuple[Number, str]] = {
    ("transformers/generation/utils.py", "_beam_search"): (
        True, "beam search assumed to go on until max_length (no beam's score rules out the rest early)"),
}

# Reads of one line in one step past which a loop is taken to never end under the values given it (a stated
# True with no False after it): the capture stops with an error instead of running on.
MAX_READS_PER_LINE = 100_000

_VALUE = re.compile(r"^(?P<value>[^*]+?)(?:\*(?P<times>\d+))?$")
# a read's place: "path/to/file.py:LINE", matched against the end of the capture's "path:line in function"
_WHERE = re.compile(r"^(?P<path>.+):(?P<line>\d+)$")


def _number(text: str, spec: str) -> Number:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(lowered)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        raise KernelcastError(f"--assume {spec}: {text!r} is not True, False or a number") from None


@dataclass(frozen=True)
class StatedRead:
    """The values a user states for the host reads at one source line, in the order they happen."""

    where: str  # "path/to/file.py:LINE" (a suffix of the capture's path is enough: "train.py:40")
    values: tuple[Number, ...]

    def value(self, nth: int) -> Number:
        """The value of the nth read (0-based) at this line: the last stated value repeats."""
        return self.values[min(nth, len(self.values) - 1)]


def parse_assume(spec: str) -> StatedRead:
    """`PATH:LINE=VALUE[*N][,VALUE[*N]...]` as a StatedRead. VALUE is True, False or a number; *N repeats it N
    times. Raises KernelcastError (one line) on a malformed statement."""
    where, sep, values_text = spec.partition("=")
    where = where.strip()
    if not sep or not _WHERE.match(where) or not values_text.strip():
        raise KernelcastError(f"--assume {spec!r}: expected PATH:LINE=VALUE (e.g. train.py:40=True*9,False), "
                              "with PATH:LINE as kernelcast's note about the read shows it")
    values: list[Number] = []
    for item in values_text.split(","):
        match = _VALUE.match(item.strip())
        if match is None:
            raise KernelcastError(f"--assume {spec!r}: {item!r} is not VALUE or VALUE*N")
        times = int(match["times"] or 1)
        if times < 1:
            raise KernelcastError(f"--assume {spec!r}: {item!r} repeats a value fewer than once")
        values.extend([_number(match["value"], spec)] * times)
    return StatedRead(where, tuple(values))


def _place(source: str) -> tuple[str, str]:
    """("path:line", function) of a capture source "path:line in function"."""
    place, _, function = source.partition(" in ")
    return place, function


def _matches(place: str, where: str) -> bool:
    return place == where or place.endswith("/" + where)


_STATED: contextvars.ContextVar[tuple[StatedRead, ...]] = contextvars.ContextVar("kernelcast_stated_reads",
                                                                                 default=())


@contextlib.contextmanager
def stated_reads(reads: tuple[StatedRead, ...] | list[StatedRead]) -> Iterator[None]:
    """The user's statements in force for the captures made inside the block."""
    token = _STATED.set(tuple(reads))
    try:
        yield
    finally:
        _STATED.reset(token)


class HostReads:
    """The values a capture gives host reads no hint decides, counting the reads at each line."""

    def __init__(self, stated: tuple[StatedRead, ...] | None = None) -> None:
        self.stated = _STATED.get() if stated is None else stated
        self._reads: dict[str, int] = {}
        self.used: set[str] = set()  # the statements that matched a read

    def new_step(self) -> None:
        """A step begins: stated values are read from their first again."""
        self._reads.clear()

    def value(self, source: str) -> tuple[Number, str] | None:
        """(value, how the capture came by it, for its note) for a read at `source` ("path:line in function"),
        or None: the dtype's placeholder."""
        place, function = _place(source)
        nth = self._reads.get(place, 0)
        self._reads[place] = nth + 1
        if nth >= MAX_READS_PER_LINE:
            raise CaptureError(f"the step read the GPU at {place} {MAX_READS_PER_LINE} times without its loop "
                               f"ending: state the reads so that it ends, e.g. --assume {place}=True*9,False")
        for read in self.stated:
            if _matches(place, read.where):
                self.used.add(read.where)
                return read.value(nth), "stated with --assume"
        for (path, loop_function), (value, why) in LIBRARY_LOOP_READS.items():
            if function == loop_function and place.rpartition(":")[0].endswith(path):
                return value, f"{value} ({why})"
        return None

    def unused(self) -> list[str]:
        """Statements that matched no read: a note says so (a typo, or a line the step never reached)."""
        return [read.where for read in self.stated if read.where not in self.used]


def how_to_state(source: str) -> str:
    """The --assume text that states the read at `source`."""
    place, _ = _place(source)
    return f"state it with --assume {place}=VALUE" if place else "state it with --assume PATH:LINE=VALUE"
