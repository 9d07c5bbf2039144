"""``python -m ctxfold`` runs the command line, like the ``ctxfold`` script."""

from ctxfold.cli import main

if __name__ == "__main__":
    main()
