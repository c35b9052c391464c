"""``python -m cli``: the same as the ``perdix`` command."""

from cli import main

main()
