"""The letters the pages name machines by, and the legend that says what each letter is."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from reports.records import markdown
from vitpe.machine import cpu_of, threads_of

#: The machines the pages name by letter, from A: the first grid runs' machine (which did not record itself), then
#: each machine the records name, in a fixed order, so that a machine has one letter on every page. A machine not
#: listed takes a letter after them, in the order of its description.
NAMED_MACHINES = ("", "AMD EPYC (L2 1024K, L3 32768K)", "AMD EPYC (L2 512K, L3 32768K)", "NVIDIA H200")
#: What each named machine is, in words: its records carry the CPU model and caches (vitpe.machine), not its
#: instruction set, which lscpu showed on the machine itself.
DESCRIBED = {
    "": "not recorded: the machine of the recipe grid's first runs, written before runs recorded their machine",
    "AMD EPYC (L2 1024K, L3 32768K)": "a 2-core AMD EPYC VM with AVX-512 and AVX512-BF16: bf16 computed natively",
    "AMD EPYC (L2 512K, L3 32768K)": "a 2-core AMD EPYC VM with AVX2 and no AVX-512: bf16 emulated, many times slower "
                                     "than float32",
    "NVIDIA H200": "one NVIDIA H200 GPU (with a 16-core host), bf16 computed natively",
}


def machine_cpu(machines: frozenset[str]) -> str:
    """The CPU (or CPUs, joined) of a run's machine descriptions, without the thread counts; "" where unrecorded."""
    return " + ".join(sorted(set(map(cpu_of, machines))))  # one CPU at several thread counts is one CPU


def thread_counts(machines: Iterable[str], *, unit: bool = True) -> str:
    """The threads of a run's machine descriptions (e.g. "1 thread, 2 threads"; ``unit=False``: "1, 2", for a column
    whose header says threads); "not recorded" where none says."""
    counts = sorted({threads_of(m) for m in machines} - {""}, key=lambda t: (int(t.split()[0]), t))
    return ", ".join(count if unit else count.split()[0] for count in counts) or "not recorded"


def cpu_legend(letter: dict[frozenset[str], str]) -> str:
    """``"B: <CPU>; C: <CPU>"``: each letter of :func:`machine_letters` and its CPU, without thread counts."""
    return "; ".join(sorted({f"{letter[m]}: {machine_cpu(m) or 'not recorded'}" for m in letter}))


def machine_labels(machines: list[frozenset[str]]) -> tuple[dict[frozenset[str], str], str]:
    """Each machine's label in a table's cells (its letter, with the threads its runs used where the table's runs used
    several counts: one letter covers a CPU at any count) and the legend under the table; no labels for one machine."""
    letter = machine_letters(machines)
    if len(letter) < 2:
        return {m: "" for m in letter}, ""
    counts = {m: thread_counts(m) for m in letter}
    if len(set(counts.values())) == 1:
        count = next(iter(counts.values()))
        every = f"; every run {count}" if count != "not recorded" else ""
        return {m: f" ({letter[m]})" for m in letter}, cpu_legend(letter) + every
    return {m: f" ({letter[m]}, {counts[m]})" for m in letter}, cpu_legend(letter)


def named_machine(letter: dict[frozenset[str], str], machine: frozenset[str], unrecorded: str = "not recorded") -> str:
    """``"<letter>: <what ran it>"`` for a machine of :func:`machine_letters`, the legend under a table."""
    return f"{letter[machine]}: {'; '.join(sorted(machine)) or unrecorded}"


def machine_letters(machines: Iterable[frozenset[str]]) -> dict[frozenset[str], str]:
    """Each machine's letter (:data:`NAMED_MACHINES`), in the order of the letters."""
    machines = set(machines)
    cpus = [*NAMED_MACHINES, *sorted({machine_cpu(m) for m in machines} - set(NAMED_MACHINES))]
    ordered = sorted(machines, key=lambda m: (cpus.index(machine_cpu(m)), sorted(m)))
    return {m: chr(ord("A") + cpus.index(machine_cpu(m))) for m in ordered}



def machines_legend(root: Path) -> str:
    """The one legend of the machine letters: each letter, the CPU or GPU its records name, what it computes with.
    Each table also says the threads or processes its runs used."""
    rows = [[chr(ord("A") + i), f"`{cpu}`" if cpu else "—", DESCRIBED[cpu]] for i, cpu in enumerate(NAMED_MACHINES)]
    return markdown(["letter", "recorded as", "what it is"], rows)


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "machines": machines_legend,
}
