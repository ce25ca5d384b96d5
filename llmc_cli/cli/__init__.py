"""Thin Click commands: parse, one core call, render, translate errors. The only users of click."""

from llmc_cli.cli.lazy_stdlib import install

install()  # before click is imported: see lazy_stdlib.py
