"""The letters the pages name machines by, and the legend that says what each letter is."""

from __future__ import annotations

from typing import Iterable


from vitpe.machine import cpu_of




#: The CPUs the pages name by letter, from A: the first grid runs' machine (which did not record itself), then B. A CPU
#: not listed takes a letter after them, in the order of its description, so a machine has one letter on every page.
NAMED_MACHINES = ("", "AMD EPYC (L2 1024K, L3 32768K)")


def machine_cpu(machines: frozenset[str]) -> str:
    """The CPU (or CPUs, joined) of a run's machine descriptions, without the thread counts; "" where unrecorded."""
    return " + ".join(sorted(set(map(cpu_of, machines))))  # one CPU at several thread counts is one CPU


def named_machine(letter: dict[frozenset[str], str], machine: frozenset[str], unrecorded: str = "not recorded") -> str:
    """``"<letter>: <what ran it>"`` for a machine of :func:`machine_letters`, the legend under a table."""
    return f"{letter[machine]}: {'; '.join(sorted(machine)) or unrecorded}"


def machine_letters(machines: Iterable[frozenset[str]]) -> dict[frozenset[str], str]:
    """Each machine's letter (:data:`NAMED_MACHINES`), in the order of the letters."""
    machines = set(machines)
    cpus = [*NAMED_MACHINES, *sorted({machine_cpu(m) for m in machines} - set(NAMED_MACHINES))]
    ordered = sorted(machines, key=lambda m: (cpus.index(machine_cpu(m)), sorted(m)))
    return {m: chr(ord("A") + cpus.index(machine_cpu(m))) for m in ordered}

