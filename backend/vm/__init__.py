"""relaxc's virtual machine: a register bytecode in a versioned binary container.

* :func:`compile_module` — a verified (planned) module and its weights → ``.rxb`` bytes;
* :func:`load_bytes` / :func:`load_file` — validate a file and decode it (an
  :class:`Executable`); anything wrong is one RxError sentence;
* :class:`VirtualMachine` — runs an executable with numpy through a pooled allocator that
  measures the memory the program holds;
* :func:`predict_memory` — what the plan promises for a run at given dim values;
* :func:`disassemble` — a readable listing of an executable.

See docs/vm.md for the file format, the instruction set and the memory accounting.
"""

from .codegen import compile_module
from .disasm import disassemble
from .loader import load_bytes, load_file
from .memory import MemoryStats, PooledAllocator
from .predict import MemoryPrediction, predict_memory
from .program import Executable
from .vm import VirtualMachine

__all__ = [
    "Executable",
    "MemoryPrediction",
    "MemoryStats",
    "PooledAllocator",
    "VirtualMachine",
    "compile_module",
    "disassemble",
    "load_bytes",
    "load_file",
    "predict_memory",
]
