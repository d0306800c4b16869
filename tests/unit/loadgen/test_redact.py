"""Masking secrets in text tunegate records or prints (issue 13, "Data loss and security").

Specifications: an API key a server echoes is masked in every case and encoding a server may
apply, ``Bearer <key>`` included, and half a key at the end of a cut text too; a storage URL
holds a password when its user part has one or a query key names one (decoded, any case), and
masking it leaves none of the password while still being recognised as holding one.
"""

from __future__ import annotations

import doctest
import json
from urllib.parse import quote, quote_plus

import pytest

from tunegate.loadgen import redact
from tunegate.loadgen.redact import MASK, mask_secrets, mask_url_password, url_holds_password

KEY = "sk-Test/Key+42=="


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(redact).failed == 0


@pytest.mark.parametrize("echo", [
    f"invalid key: Bearer {KEY}",
    f"invalid key: bearer {KEY.lower()}",
    f"AUTHORIZATION: BEARER {KEY.upper()}",
    f"key={quote(KEY, safe='')}",
    f"key={quote(KEY, safe='').lower()}",  # percent-encoding in lower-case hex
    f"key={quote(KEY)}",
    f"key={quote_plus(KEY)}",
    json.dumps({"detail": f"Bearer {KEY}"}),
    json.dumps({"detail": f"Bearer {KEY}"}).replace("/", "\\/"),  # PHP-style escaped slash
    f"{KEY}{KEY} twice, glued",
])
def test_an_echoed_key_is_masked_in_every_form(echo: str) -> None:
    shown = mask_secrets(echo, [KEY])
    assert MASK in shown
    folded = shown.casefold()
    for form in (KEY, quote(KEY, safe=""), quote_plus(KEY), KEY.replace("/", "\\/")):
        assert form.casefold() not in folded
    assert "test" not in folded and "42" not in folded


def test_bearer_and_the_text_around_the_key_stay_readable() -> None:
    assert mask_secrets(f"HTTP 401: invalid key: Bearer {KEY}.", [KEY]) == \
        "HTTP 401: invalid key: Bearer ***."


def test_no_key_or_an_empty_key_changes_nothing() -> None:
    assert mask_secrets("Bearer abc", [None, ""]) == "Bearer abc"
    assert mask_secrets("", [KEY]) == ""


def test_several_secrets_are_all_masked_the_longest_first() -> None:
    assert mask_secrets("token abcdef, key abc", ["abc", "abcdef"]) == "token ***, key ***"


@pytest.mark.parametrize("kept", range(1, len(KEY)))
def test_half_a_key_at_the_end_of_a_cut_text_is_masked(kept: int) -> None:
    shown = mask_secrets(f'{{"detail": "Bearer {KEY[:kept]}', [KEY], cut=True)
    assert shown == '{"detail": "Bearer ***'


def test_an_uncut_text_keeps_its_ending() -> None:
    assert mask_secrets("ends with sk", [KEY]) == "ends with sk"


HOLDING = [
    "postgresql://tuner:s3cr3t@db/tunegate",
    "postgresql://TUNER:s3cr3t@db/tunegate",
    "postgresql://tuner:s3@cr3t@db/tunegate",
    "postgresql://tuner:s3/cr3t@db/tunegate",         # a driver reads up to the @
    "postgresql://tuner:s3?cr3t#x@db/tunegate",
    "postgresql://:s3cr3t@db/tunegate",
    "postgresql://tuner@db/tunegate?password=s3cr3t",
    "postgresql://tuner@db/tunegate?PassWord=s3cr3t",
    "postgresql://tuner@db/tunegate?PASSWORD=s3cr3t",
    "postgresql://tuner@db/tunegate?sslmode=require&Passwd=s3cr3t",
    "postgresql://tuner@db/tunegate?pwd=s3cr3t",
    "postgresql://tuner@db/tunegate?pass=s3cr3t",
    "postgresql://tuner@db/tunegate?db_pass=s3cr3t",
    "postgresql://tuner@db/tunegate?sslpassword=s3cr3t",
    "postgresql://tuner@db/tunegate?secret=s3cr3t",
    "postgresql://tuner@db/tunegate?token=s3cr3t",
    "postgresql://tuner@db/tunegate?auth_token=s3cr3t",
    "postgresql://tuner@db/tunegate?api_key=s3cr3t",
    "postgresql://tuner@db/tunegate?pass%77ord=s3cr3t",  # the key percent-encoded
    "postgresql://tuner@db/tunegate?pass_word=x&password=s3cr3t",
    "postgresql://tuner@db/tunegate?password=s3cr3t#and-more-s3cr3t",
    "postgresql://tuner@db/tunegate?a=1;password=s3cr3t",
    "mysql+pymysql://tuner@db/tunegate?password=s3%20cr3t",
]
CLEAN = [
    "sqlite:////shared/tunegate.db",
    "sqlite:////odd/dir:name@x/tunegate.db",
    "postgresql://tuner@db/tunegate",
    "postgresql://tuner@db:5432/tunegate?sslmode=require",
    "postgresql://db/tunegate?passfile=/home/tuner/.pgpass",
    "postgresql://db/tunegate?compass=north&bypass_cache=1",
]


@pytest.mark.parametrize("url", HOLDING)
def test_a_url_with_a_password_is_recognised_and_masked(url: str) -> None:
    assert url_holds_password(url)
    masked = mask_url_password(url)
    assert "s3" not in masked and "cr3" not in masked
    assert url_holds_password(masked)  # what the config check refuses is the masked form


@pytest.mark.parametrize("url", CLEAN)
def test_a_url_without_a_password_is_left_alone(url: str) -> None:
    assert not url_holds_password(url)
    assert mask_url_password(url) == url


def test_masking_keeps_the_rest_of_the_url() -> None:
    assert mask_url_password("postgresql://tuner:p@ss@db:5432/x?sslmode=require&PWD=s3&a=1") \
        == "postgresql://tuner:***@db:5432/x?sslmode=require&PWD=***&a=1"
