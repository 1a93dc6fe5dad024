"""The ``tensorfabric`` command line: one thin module per verb, wired through :mod:`.main`."""
