"""`gccl bench`: gccl side by side with OpenCV and the GPU peers, on the same images.

One concern per module: suite (the cases), engines (one adapter per library),
timing, crosscheck (do engines agree), runner (the kernel and end-to-end
levels), records, report (table, JSON, CSV, plot), machine (what it ran on),
command (the CLI-facing entry point, `run_bench_command`).
"""
