"""`python -m ccl_cli` runs the gccl command line."""

from .cli import main

main()
