"""`redact_secrets` on made-up secrets in the shapes agents meet, and on ordinary text.

Every secret here is generated from a seeded random source at import time: made up, never a
real credential, and never written into the repository in a shape a scanner would flag.
"""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import pytest

from conftest import transcript_params
from ctxfold.messages import read_jsonl
from ctxfold.summarizers.redact import REDACTED, redact_secrets

RNG = random.Random(20_240_601)
UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"


def fake(alphabet: str, size: int) -> str:
    """`size` random characters of `alphabet`, with at least one digit when it has digits."""
    text = "".join(RNG.choice(alphabet) for _ in range(size))
    if set(alphabet) & set(string.digits) and not any(c.isdigit() for c in text):
        text = text[:-1] + RNG.choice(string.digits)
    return text


def password() -> str:
    return fake(ALNUM, 10) + RNG.choice("!#%^*") + fake(string.digits, 2)


def key_block(kind: str, lines: int = 8, width: int = 64) -> tuple[str, list[str]]:
    """A private key block of `kind` (e.g. "RSA PRIVATE KEY") and its body lines."""
    body = [fake(B64, width) for _ in range(lines)] + [fake(B64, 20) + "=="]
    block = f"-----BEGIN {kind}-----\n" + "\n".join(body) + f"\n-----END {kind}-----"
    return block, body


AWS_ID, AWS_SECRET = "AKIA" + fake(UPPER_DIGITS, 16), fake(B64, 40)
STS_ID, STS_SECRET, STS_TOKEN = "ASIA" + fake(UPPER_DIGITS, 16), fake(B64, 40), fake(B64, 300)
PEM, PEM_BODY = key_block("RSA PRIVATE KEY")
OPENSSH, OPENSSH_BODY = key_block("OPENSSH PRIVATE KEY", width=70)
EC, EC_BODY = key_block("EC PRIVATE KEY", lines=3)
PGP_BODY = [fake(B64, 64) for _ in range(6)]
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: Keybase OpenPGP v2.1.0\n\n"
    + "\n".join(PGP_BODY)
    + "\n="
    + fake(B64, 4)
    + "\n-----END PGP PRIVATE KEY BLOCK-----"
)
TRUNCATED_BODY = [fake(B64, 64) for _ in range(4)]
TRUNCATED = "$ head -n 5 ~/.ssh/id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(
    TRUNCATED_BODY
)
ENCRYPTED_BODY = [fake(B64, 64) for _ in range(3)]
ENCRYPTED = (
    "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
    + fake("0123456789ABCDEF", 32)
    + "\n\n"
    + "\n".join(ENCRYPTED_BODY)
    + "\n[… 1,204 characters left out …]"
)


def case(label: str, text: str, *secrets: str) -> object:
    return pytest.param(text, secrets, id=label)


pw = [password() for _ in range(12)]
SENDGRID = f"SG.{fake(ALNUM + '_-', 22)}.{fake(ALNUM + '_-', 43)}"
JWT = ".".join(
    [
        base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("="),
        base64.urlsafe_b64encode(json.dumps({"sub": fake(ALNUM, 12)}).encode()).decode(),
        fake(ALNUM + "_-", 43),
    ]
).replace("=", "")
SLACK_PATH = f"T{fake(UPPER_DIGITS, 8)}/B{fake(UPPER_DIGITS, 8)}/{fake(ALNUM, 24)}"
GOOGLE = "AIza" + fake(ALNUM + "_-", 35)
BASIC = base64.b64encode(f"ci-bot:{pw[10]}".encode()).decode()

CORPUS = [
    case("aws id in env", f"export AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID),
    case("aws secret in env", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    case(
        "aws credentials file",
        f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {AWS_ID}\n"
        f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1",
        AWS_ID,
        AWS_SECRET,
    ),
    case(
        "aws sts json",
        json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": STS_ID,
                    "SecretAccessKey": STS_SECRET,
                    "SessionToken": STS_TOKEN,
                    "Expiration": "2024-06-01T12:00:00Z",
                }
            },
            indent=2,
        ),
        STS_ID,
        STS_SECRET,
        STS_TOKEN,
    ),
    case(
        "https url password",
        f"git clone https://deploy:{pw[0]}@git.example.com/team/app.git",
        pw[0],
    ),
    case(
        "postgres url password",
        f"DATABASE_URL=postgresql://app:{pw[1]}@db.internal:5432/prod",
        pw[1],
    ),
    case("redis url password", f"redis-cli -u redis://:{pw[2]}@cache.internal:6379/0 ping", pw[2]),
    case("rsa private key", f"$ cat deploy_key\n{PEM}\n$ ", *PEM_BODY),
    case("openssh private key", f"{OPENSSH}\n", *OPENSSH_BODY),
    case("ec private key in json", json.dumps({"key": EC}), *EC_BODY[:-1]),
    case("pgp private key block", f"gpg --export-secret-keys -a\n{PGP}", *PGP_BODY),
    case("truncated private key", TRUNCATED, *TRUNCATED_BODY),
    case("encrypted key cut by a clip", ENCRYPTED, *ENCRYPTED_BODY),
    case(
        "stripe secret key",
        f"stripe.api_key = 'sk_live_{(s := fake(ALNUM, 24))}'",
        f"sk_live_{s}",
    ),
    case(
        "stripe restricted key",
        f"STRIPE_KEY=rk_live_{(r := fake(ALNUM, 24))} npm run sync",
        f"rk_live_{r}",
    ),
    case(
        "hugging face token",
        f"huggingface-cli login --token hf_{(h := fake(string.ascii_letters, 34))}",
        f"hf_{h}",
    ),
    case(
        "gitlab token header",
        f'curl --header "PRIVATE-TOKEN: glpat-{(g := fake(ALNUM + "_-", 20))}" https://gl.example.com/api/v4/projects',
        f"glpat-{g}",
    ),
    case("sendgrid key", f"SENDGRID_API_KEY={SENDGRID}", SENDGRID),
    case(
        "github classic token",
        f'curl -H "Authorization: token ghp_{(t := fake(ALNUM, 36))}" https://api.example.com/user',
        f"ghp_{t}",
    ),
    case(
        "github fine-grained token",
        f"GH_PAT=github_pat_{(f := fake(ALNUM, 22) + '_' + fake(ALNUM, 59))}",
        f"github_pat_{f}",
    ),
    case(
        "GITHUB_TOKEN assignment",
        f"GITHUB_TOKEN={(gt := fake('0123456789abcdef', 40))} gh release create v1.2.0",
        gt,
    ),
    case(
        "NPM_TOKEN assignment",
        f"NPM_TOKEN={(nt := '-'.join(fake('0123456789abcdef', n) for n in (8, 4, 4, 4, 12)))}",
        nt,
    ),
    case(
        "npmrc auth token",
        f"//npm.example.test/:_authToken=npm_{(n := fake(ALNUM, 36))}",
        f"npm_{n}",
    ),
    case(
        "slack bot token",
        f"SLACK_BOT_TOKEN=xoxb-{(x := fake(string.digits, 12) + '-' + fake(ALNUM, 24))}",
        f"xoxb-{x}",
    ),
    case(
        "slack webhook",
        f"curl -X POST https://hooks.slack.com/services/{SLACK_PATH}",
        SLACK_PATH,
    ),
    case(
        "openai project key",
        f"client = OpenAI(api_key='sk-proj-{(o := fake(ALNUM + '_-', 48))}')",
        f"sk-proj-{o}",
    ),
    case(
        "anthropic key",
        f"ANTHROPIC_API_KEY=sk-ant-api03-{(a := fake(ALNUM + '_-', 80))}",
        f"sk-ant-api03-{a}",
    ),
    case("jwt in a cookie", f"Cookie: session={JWT}; theme=dark", JWT),
    case("mysql -p", f"mysql -u root -p{pw[3]} shop < dump.sql", pw[3]),
    case("mysqldump -p quoted", f"mysqldump -u backup -p'{pw[4]}' --all-databases", pw[4]),
    case(
        "bearer header",
        f"Authorization: Bearer {(b := fake(ALNUM + '._-', 40))}",
        b,
    ),
    case("basic auth header", f"-H 'Authorization: Basic {BASIC}'", BASIC),
    case("password= in .env", f"DB_PASSWORD={pw[5]}\nDB_USER=app", pw[5]),
    case("secret: in yaml", f"jwt:\n  secret: {pw[6]}\n  ttl: 3600", pw[6]),
    case("api_key in python", f'api_key = "{(k := fake(ALNUM, 32))}"', k),
    case("--password flag", f"docker login -u ci --password {pw[7]} registry.example.com", pw[7]),
    case(
        "google api key in a url",
        f"GET https://maps.example.com/api/geocode?address=x&key={GOOGLE}",
        GOOGLE,
    ),
    case(
        "azure connection string",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        f"AccountKey={(ak := fake(B64, 86) + '==')};EndpointSuffix=core.example.net",
        ak,
    ),
    case(
        "oauth client secret in a form body",
        f"grant_type=client_credentials&client_id=web&client_secret={pw[8]}",
        pw[8],
    ),
    case(
        "pypi token",
        f"TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{(p := fake(ALNUM + '_-', 60))} twine upload dist/*",
        f"pypi-AgEIcHlwaS5vcmc{p}",
    ),
]


@pytest.mark.guarantee("secrets-not-sent")
@pytest.mark.parametrize(("text", "secrets"), CORPUS)
def test_each_secret_of_the_corpus_is_redacted(text: str, secrets: tuple[str, ...]) -> None:
    """No part of a made-up secret survives redaction, and something says it was there."""
    redacted = redact_secrets(text)
    left = [secret for secret in secrets if secret in redacted]
    assert left == [], redacted
    assert REDACTED in redacted


def test_the_corpus_covers_every_shape_the_issue_lists() -> None:
    """At least 31 secrets, in at least 31 contexts, are redacted (the issue's goal is 30 of
    31): counted over the whole corpus, so a regression in one shape shows here too."""
    caught = missed = 0
    for param in CORPUS:
        text, secrets = param.values  # type: ignore[attr-defined]
        redacted = redact_secrets(text)
        for secret in secrets:
            if secret in redacted:
                missed += 1
            else:
                caught += 1
    assert len(CORPUS) >= 31
    assert (caught, missed) == (caught, 0) and caught >= 31


def test_labels_and_context_stay_readable() -> None:
    """Only the secret goes: the name it was assigned to, the host of a URL, the rest of the
    command stay as they were."""
    assert redact_secrets("DATABASE_URL=postgresql://app:Pa55-word!@db:5432/prod") == (
        "DATABASE_URL=postgresql://app:[redacted]@db:5432/prod"
    )
    assert redact_secrets("mysql -u root -pS3cret99 shop") == "mysql -u root -p[redacted] shop"
    assert redact_secrets('{"password": "hunter2hunter2", "user": "ana"}') == (
        '{"password": "[redacted]", "user": "ana"}'
    )


ORDINARY = [
    "commit 1be777fe725a4c5d1b3c0e0f2a9d8c7b6a5f4e3d (HEAD -> main)",
    "request 123e4567-e89b-12d3-a456-426614174000 failed",
    'PNG_FIXTURE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA'
    '60e6kgAAAABJRU5ErkJggg=="',
    "see /home/ana/project/src/app/settings/secrets.py:42",
    "max_tokens=100000, tokenizer=o200k_base, tokens_before=10805",
    "def login(user, password=None):\n    if password == confirm_password:\n"
    "        token = get_token(user)",
    "password = request.POST.get('password')  # never logged",
    "token=self.tokens[0]; secret_key=settings.SECRET_KEY",
    "PWD=/home/ana/project OLDPWD=/home/ana",
    "Bearer authentication is described in RFC 6750; Basic usage below.",
    "git@github.com:org/repo.git and https://example.com/a:b@c and postgresql://localhost:5432/db",
    "export API_KEY=$API_KEY; export PASSWORD=${DB_PASSWORD}; password=<your password>",
    "postgres://user:password@localhost/db  # the documented placeholder",
    "KeyError: 'token'; call_7MqMjJMaXLRTpdPdzCjzjfpE; sk-learn-is-not-a-key",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 ana@laptop",
    "mysql -u root -p shop  # prompts for the password",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Hashes, UUIDs, base64 fixtures, paths, code that handles passwords, placeholders and
    references to where a secret is kept are not secrets."""
    assert redact_secrets(text) == text


@pytest.mark.transcripts
@pytest.mark.parametrize("path", transcript_params())
def test_the_shared_transcripts_hold_nothing_redact_secrets_changes(path: Path) -> None:
    """Over every message of a real agent transcript (contents, tool names, arguments, call
    ids), redaction changes nothing: no false positive on ordinary agent work."""
    for message in read_jsonl(path):
        texts = [message.text, *(f"{c.id} {c.name} {c.arguments}" for c in message.tool_calls)]
        for text in texts:
            assert redact_secrets(text) == text


ADVERSARIAL = {
    "one long word": "a" * 1_000_000,
    "dashes and jwt starts": "-eyJ" * 250_000,
    "jwt segments that never close": "eyJaaaaaaaa.bbbbbbbbb!" * 45_455,
    "key prefixes": "sk-" * 333_334,
    "secret names without values": "secret" * 166_667,
    "assignments": 'password="' * 100_000,
    "spaces after a name": "password:" + " " * 1_000_000,
    "url starts": "ab://x:" * 142_858,
    "url with a huge user": "https://" + "u" * 1_000_000,
    "key block headers": "-----BEGIN RSA PRIVATE KEY-----" * 32_259,
    "bearer words": "Bearer " * 142_858,
    "flags": "--password " * 90_910,
    "mysql flags": "mysql " + "-p " * 333_333,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=list(ADVERSARIAL))
def test_a_one_megabyte_adversarial_line_is_handled(text: str) -> None:
    """Lines built to make a backtracking pattern take quadratic time go through, and what
    comes out is redacted for good: a second pass changes nothing. (The patterns are anchored
    where a run of their characters starts and bounded in length, so the cost of a line grows
    with its length; a quadratic one would hold this test for hours.)"""
    redacted = redact_secrets(text)
    assert redact_secrets(redacted) == redacted


def test_a_flag_after_a_redacted_assignment_is_redacted_whole_on_any_line() -> None:
    """A secret flag that follows a redacted assignment on its line is replaced whole, on the
    first line of a text or on a later one: the flag's line is found where it stands after the
    assignment's value was replaced."""
    expected = f"password={REDACTED} --api-key {REDACTED}"
    for before, after in (("notes\n", ""), ("notes\n", "\nmore"), ("", "")):
        line = f"password=short1 --api-key {fake(ALNUM, 20)}"  # a line not redacted before
        assert redact_secrets(f"{before}{line}{after}") == f"{before}{expected}{after}"
