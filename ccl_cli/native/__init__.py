"""gccl's compiled code: the CPU labeling engine (`src/engine.c`, its threads in
`src/pool.c`) and PNG's row filters (`src/png.c`), in the extension module `gccl_cpu`
(its binding, `src/binding.c`), which the package build compiles (setup.py).
"""
