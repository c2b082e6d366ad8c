"""What a run records of its machine: one line, the CPU and its caches, then its threads, split apart again when the
pages group runs by CPU and tell thread counts apart."""

import torch

from vitpe.machine import as_one_process, cpu_of, described, threads_of


def test_a_described_line_splits_into_its_cpu_and_its_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        line = described()
    finally:
        torch.set_num_threads(threads)
    assert line.endswith(", 1 thread")
    assert f"{cpu_of(line)}, {threads_of(line)}" == line
    for description, cpu, threads in (
            ("AMD EPYC (L2 1024K, L3 32768K), 2 threads", "AMD EPYC (L2 1024K, L3 32768K)", "2 threads"),
            ("AMD EPYC (L2 512K), 2 processes × 1 thread", "AMD EPYC (L2 512K)", "2 processes × 1 thread"),
            ("NVIDIA H200", "NVIDIA H200", ""),  # a GPU line says no threads
            ("4 × NVIDIA H200", "4 × NVIDIA H200", "")):
        assert (cpu_of(description), threads_of(description)) == (cpu, threads)


def test_one_thread_processes_read_as_one_process_on_as_many_threads():
    assert as_one_process("AMD EPYC (L2 512K), 2 processes × 1 thread") == "AMD EPYC (L2 512K), 2 threads"
    several = "AMD EPYC (L2 512K), 2 processes × 2 threads"  # not one thread each: left as it is
    assert as_one_process(several) == several
