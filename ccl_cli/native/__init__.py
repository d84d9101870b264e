"""gccl's compiled code: the CPU labeling engine for images (`src/engine.c`) and volumes
(`src/volume_*.c`), its threads (`src/pool.c`), in the extension module `gccl_cpu` (its
binding, `src/binding.c`), which the package build compiles (setup.py).
"""
