"""`python -m o1sim` runs the command line."""

from .cli import main

main()
