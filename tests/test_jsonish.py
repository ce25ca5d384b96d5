"""The tolerant JSON tokeniser both almost-JSON readers stand on (config.importers.strip_jsonc,
providers.text.repair_json; their own tests cover what each makes of the tokens)."""

from __future__ import annotations

from llmc_cli.jsonish import Token, is_trailing_comma, next_significant, tokens


def test_tokens_keep_the_text_exactly() -> None:
    text = '{"a\\"b": 1, // note\n /* c */ key_1-x: \'s\',}'
    toks = tokens(text, quotes="\"'", comments=True)
    assert "".join(t.text for t in toks) == text
    assert [t for t in toks if t.kind != "char" and t.kind != "space"] == [
        Token("string", '"a\\"b"'),
        Token("comment", "// note"),
        Token("comment", "/* c */"),
        Token("word", "key_1-x"),
        Token("string", "'s'"),
    ]


def test_comments_and_single_quotes_only_when_asked() -> None:
    assert [t.kind for t in tokens("'a'//b")] == ["char", "word", "char", "char", "char", "word"]
    assert [t.kind for t in tokens("'a'//b", quotes="'", comments=True)] == ["string", "comment"]


def test_an_unterminated_string_or_comment_runs_to_the_end() -> None:
    assert tokens('"abc\\"', comments=True) == [Token("string", '"abc\\"')]
    assert tokens("/* open", comments=True) == [Token("comment", "/* open")]


def test_a_comma_is_trailing_only_before_a_closing_bracket() -> None:
    toks = tokens("[1, /* x */ ], {a: 2 ,\n}", comments=True)
    commas = [i for i, t in enumerate(toks) if t.text == ","]
    assert [is_trailing_comma(toks, i) for i in commas] == [True, False, True]
    assert next_significant(toks, commas[1]) == Token("char", "{")
    assert next_significant(toks, len(toks) - 1) is None
