"""Thin Click commands: parse, one core call, render, translate errors. The only users of click."""
