"""Writes tests/corpus/credentials.jsonl: credential kinds x placements, fake but realistic.

Run `python tests/corpus/make_credentials.py` to regenerate; the output is deterministic (one
seeded generator), so a regenerated file is byte-identical unless this script changed. Each
line is one sample: {"kind", "placement", "text", "secrets"}, where `secrets` are the parts of
the text a viewer must never see (the random part of each planted value, at least 8
characters). The encodings (JSON escapes, URL-encoding, HTML entities, base64, UTF-16/32,
gzip, deflate, brotli, zstd) are applied to every sample by tests/corpus/encodings.py.

The values are fake: random characters in the documented shape of each provider's tokens
(prefixes and lengths are public facts, e.g. from the gitleaks rule set), never real keys.
"""

from __future__ import annotations

import base64
import json
import random
import shlex
import string
from pathlib import Path

OUT = Path(__file__).with_name("credentials.jsonl")
rng = random.Random(25)
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS


def pick(chars: str, n: int) -> str:
    # Every value holds a digit, so none is an English word by chance.
    while True:
        value = "".join(rng.choice(chars) for _ in range(n))
        if any(c.isdigit() for c in value) or not set(chars) & set(DIGITS):
            return value


def alnum(n: int) -> str:
    return pick(ALNUM, n)


def hexs(n: int) -> str:
    return pick("0123456789abcdef", n)


def b64(n: int) -> str:
    return pick(ALNUM + "+/", n)


def urlsafe(n: int) -> str:
    return pick(ALNUM + "-_", n)


def password() -> str:
    return pick(ALNUM, 6) + rng.choice("!#%*") + pick(ALNUM, 6)


def pem(label: str) -> tuple[str, list[str]]:
    lines = [b64(64) for _ in range(4)]
    body = "\n".join(lines)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", lines


def jwt() -> tuple[str, list[str]]:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = json.dumps({"sub": alnum(12), "iat": 1780000000}).encode()
    payload = base64.urlsafe_b64encode(claims).rstrip(b"=").decode()
    signature = urlsafe(43)
    return f"{head}.{payload}.{signature}", [payload, signature]


def bare(prefix: str, tail: str) -> tuple[str, list[str]]:
    return prefix + tail, [tail]


def kinds() -> list[tuple[str, str, list[str]]]:
    """(kind, snippet, secrets), one per credential kind."""
    found: list[tuple[str, str, list[str]]] = []

    def add(kind: str, snippet: str, secrets: list[str]) -> None:
        found.append((kind, snippet, secrets))

    def token(kind: str, prefix: str, tail: str) -> None:
        value, secrets = bare(prefix, tail)
        add(kind, value, secrets)

    # --- cloud ---------------------------------------------------------------------------
    token("aws-access-key-id", "AKIA", pick(UPPER + "234567", 16))
    token("aws-sts-key-id", "ASIA", pick(UPPER + "234567", 16))
    secret = b64(40)
    add("aws-secret-access-key", f"aws_secret_access_key = {secret}", [secret])
    key_id, secret, session = "ASIA" + pick(UPPER + "234567", 16), b64(40), b64(120)
    add(
        "aws-sts-credentials-json",
        json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": key_id,
                    "SecretAccessKey": secret,
                    "SessionToken": session,
                    "Expiration": "2026-08-01T00:00:00Z",
                }
            }
        ),
        [key_id[4:], secret, session[:40]],
    )
    secret = b64(40)
    add("aws-cli-env", f"AWS_SECRET_ACCESS_KEY={secret}", [secret])
    session = b64(100)
    add("aws-session-token-env", f"AWS_SESSION_TOKEN={session}", [session[:40]])
    token("gcp-api-key", "AIza", urlsafe(35))
    token("gcp-oauth-access-token", "ya29.", urlsafe(60))
    key, lines = pem("PRIVATE KEY")
    add(
        "gcp-service-account-json",
        json.dumps(
            {
                "type": "service_account",
                "project_id": "demo-project",
                "private_key_id": hexs(40),
                "private_key": key + "\n",
                "client_email": "svc@demo-project.iam.gserviceaccount.com",
            }
        ),
        lines[:2],
    )
    secret = "GOCSPX-" + urlsafe(28)
    add("google-oauth-client-secret", json.dumps({"client_secret": secret}), [secret[7:]])
    secret = b64(86) + "=="
    add(
        "azure-storage-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=demostore;"
        f"AccountKey={secret};EndpointSuffix=core.windows.net",
        [secret[:40]],
    )
    secret = b64(43) + "="
    add(
        "azure-service-bus-connection-string",
        "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={secret}",
        [secret[:30]],
    )
    sig = b64(43) + "="
    add(
        "azure-sas-url",
        "https://demostore.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2026-09-01T00:00:00Z&sig={sig.replace('+', '%2B').replace('/', '%2F')}",
        [sig[:12].replace("+", "%2B").replace("/", "%2F")[:8]],
    )
    secret = pick(ALNUM, 3) + rng.choice(DIGITS) + "Q~" + pick(ALNUM + "_~.-", 34)
    add("azure-ad-client-secret", secret, [secret[6:30]])
    secret = pick(LOWER + "234567", 52)
    add("azure-devops-pat", f"AZURE_DEVOPS_EXT_PAT={secret}", [secret])
    sub = hexs(32)
    add("azure-apim-subscription-key", f"Ocp-Apim-Subscription-Key: {sub}", [sub])
    key_id, secret = "LTAI" + alnum(20), b64(30)
    add(
        "alibaba-access-key",
        f"ALIBABA_CLOUD_ACCESS_KEY_ID={key_id}\nALIBABA_CLOUD_ACCESS_KEY_SECRET={secret}",
        [key_id[4:], secret],
    )
    # --- code hosting and CI --------------------------------------------------------------
    token("github-pat", "ghp_", alnum(36))
    token("github-oauth", "gho_", alnum(36))
    token("github-app-user-token", "ghu_", alnum(36))
    token("github-app-server-token", "ghs_", alnum(36))
    token("github-refresh-token", "ghr_", alnum(36))
    token("github-fine-grained-pat", "github_pat_", alnum(22) + "_" + alnum(59))
    token("gitlab-pat", "glpat-", urlsafe(20))
    token("gitlab-runner-token", "glrt-", urlsafe(20))
    token("gitlab-deploy-token", "gldt-", urlsafe(20))
    token("gitlab-pipeline-trigger", "glptt-", hexs(40))
    token("bitbucket-app-password", "ATBB", alnum(32))
    token("atlassian-api-token", "ATATT3xFfGF0", urlsafe(180))
    token("circleci-token", "CCIPAT_", alnum(22) + "_" + hexs(40))
    secret = hexs(40)
    add("travis-token", f"TRAVIS_API_TOKEN={secret}", [secret])
    token("npm-token", "npm_", alnum(36))
    token("pypi-token", "pypi-AgEIcHlwaS5vcmc", urlsafe(70))
    token("rubygems-token", "rubygems_", hexs(48))
    token("docker-hub-pat", "dckr_pat_", urlsafe(27))
    token("terraform-cloud-token", alnum(14) + ".atlasv1.", urlsafe(67))
    token("pulumi-token", "pul-", hexs(40))
    token("hashicorp-vault-token", "hvs.", urlsafe(90))
    token("doppler-token", "dp.pt.", alnum(43))
    token("databricks-token", "dapi", hexs(32))
    token("digitalocean-pat", "dop_v1_", hexs(64))
    token("heroku-api-key-v2", "HRKU-AA", urlsafe(58))
    token("fly-io-token", "fo1_", urlsafe(43))
    token("vercel-token", "vcp_", alnum(56))
    token("netlify-token", "nfp_", alnum(36))
    token("grafana-service-account", "glsa_", alnum(32) + "_" + hexs(8))
    token("grafana-cloud-token", "glc_", b64(60))
    token("sentry-user-token", "sntryu_", hexs(64))
    token("new-relic-user-key", "NRAK-", pick(UPPER + DIGITS, 27))
    secret = hexs(32)
    add("datadog-api-key", f"DD_API_KEY={secret}", [secret])
    token("postman-api-key", "PMAK-", hexs(24) + "-" + hexs(34))
    token("linear-api-key", "lin_api_", alnum(40))
    token("notion-token", "ntn_", pick(DIGITS, 11) + alnum(35))
    token("shopify-access-token", "shpat_", hexs(32))
    token("shopify-shared-secret", "shpss_", hexs(32))
    token("planetscale-password", "pscale_pw_", urlsafe(43))
    token("prefect-api-key", "pnu_", alnum(36))
    token("readme-api-key", "rdme_", pick(LOWER + DIGITS, 70))
    token("age-secret-key", "AGE-SECRET-KEY-1", pick("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58))
    token("1password-service-token", "ops_eyJ", b64(260))
    # --- messaging and payments -----------------------------------------------------------
    token("slack-bot-token", "xoxb-", f"{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{alnum(24)}")
    token(
        "slack-user-token",
        "xoxp-",
        f"{pick(DIGITS, 12)}-{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{hexs(32)}",
    )
    token(
        "slack-app-token", "xapp-1-", f"A{pick(UPPER + DIGITS, 10)}-{pick(DIGITS, 13)}-{hexs(64)}"
    )
    hook = f"T{pick(UPPER + DIGITS, 10)}/B{pick(UPPER + DIGITS, 10)}/{alnum(24)}"
    add("slack-webhook", f"https://hooks.slack.com/services/{hook}", [hook.split("/")[-1]])
    hook = f"https://discord.com/api/webhooks/{pick(DIGITS, 18)}/{urlsafe(68)}"
    add("discord-webhook", hook, [hook[-60:]])
    secret = f"{pick(DIGITS, 10)}:AA{urlsafe(33)}"
    add("telegram-bot-token", f"TELEGRAM_BOT_TOKEN={secret}", [secret[12:]])
    token("stripe-secret-key", "sk_live_", alnum(99))
    token("stripe-restricted-key", "rk_live_", alnum(99))
    token("stripe-test-key", "sk_test_", alnum(24))
    token("stripe-webhook-secret", "whsec_", alnum(32))
    token("twilio-api-key", "SK", hexs(32))
    secret = hexs(32)
    add("twilio-auth-token", f"TWILIO_AUTH_TOKEN={secret}", [secret])
    token("sendgrid-api-key", "SG.", urlsafe(22) + "." + urlsafe(43))
    token("sendinblue-api-key", "xkeysib-", hexs(64) + "-" + alnum(16))
    secret = "key-" + hexs(32)
    add("mailgun-api-key", f"MAILGUN_API_KEY={secret}", [secret[4:]])
    secret = hexs(32) + "-us21"
    add("mailchimp-api-key", f'mailchimp_key: "{secret}"', [secret[:32]])
    token("square-access-token", "EAAA", urlsafe(60))
    token("square-oauth-secret", "sq0csp-", urlsafe(43))
    token("shippo-token", "shippo_live_", hexs(40))
    token("duffel-token", "duffel_live_", urlsafe(43))
    # --- AI providers ---------------------------------------------------------------------
    token("openai-project-key", "sk-proj-", urlsafe(74) + "T3BlbkFJ" + urlsafe(74))
    token("openai-legacy-key", "sk-", alnum(20) + "T3BlbkFJ" + alnum(20))
    token("openai-service-account-key", "sk-svcacct-", urlsafe(74) + "T3BlbkFJ" + urlsafe(74))
    token("anthropic-api-key", "sk-ant-api03-", urlsafe(93) + "AA")
    token("anthropic-admin-key", "sk-ant-admin01-", urlsafe(93) + "AA")
    secret = "AIza" + urlsafe(35)
    add("google-ai-header", f"x-goog-api-key: {secret}", [secret[4:]])
    token("groq-api-key", "gsk_", alnum(52))
    secret = alnum(32)
    add("mistral-api-key", f"MISTRAL_API_KEY={secret}", [secret])
    token("perplexity-api-key", "pplx-", alnum(48))
    token("xai-api-key", "xai-", alnum(80))
    secret = alnum(40)
    add("cohere-api-key", f'CO_API_KEY="{secret}"', [secret])
    token("replicate-token", "r8_", alnum(37))
    secret = hexs(64)
    add("together-api-key", f"export TOGETHER_API_KEY={secret}", [secret])
    token("deepseek-api-key", "sk-", hexs(32))
    token("openrouter-key", "sk-or-v1-", hexs(64))
    token("fireworks-key", "fw_", alnum(24))
    token("langsmith-key", "lsv2_pt_", hexs(32) + "_" + hexs(10))
    token("pinecone-key", "pcsk_", alnum(6) + "_" + alnum(60))
    token("huggingface-token", "hf_", pick(UPPER + LOWER, 34))
    token("huggingface-org-token", "api_org_", pick(UPPER + LOWER, 34))
    token("cerebras-key", "csk-", pick(LOWER + DIGITS, 48))
    token("elevenlabs-key", "sk_", hexs(48))
    # --- generic shapes -------------------------------------------------------------------
    value, secrets = jwt()
    add("jwt", value, secrets)
    value, secrets = jwt()
    add("jwt-cookie", f"Cookie: theme=dark; session={value}", secrets)
    key, lines = pem("RSA PRIVATE KEY")
    add("rsa-private-key", key, lines)
    key, lines = pem("OPENSSH PRIVATE KEY")
    add("openssh-private-key", key, lines)
    key, lines = pem("EC PRIVATE KEY")
    add("ec-private-key", key, lines)
    key, lines = pem("PGP PRIVATE KEY BLOCK")
    add("pgp-private-key", key, lines)
    key, lines = pem("ENCRYPTED PRIVATE KEY")
    add("encrypted-private-key", key, lines)
    secret = password()
    add("pgpassword-env", f"PGPASSWORD={secret} psql -h db -U app", [secret])
    secret = password()
    add("mysql-pwd-env", f"MYSQL_PWD={secret}", [secret])
    secret = hexs(128)
    add("rails-secret-key-base", f"SECRET_KEY_BASE={secret}", [secret[:40]])
    secret = pick(ALNUM + "!@#%^*(-_=+)", 50)
    add("django-secret-key", f"SECRET_KEY = '{secret}'", [secret])
    secret = urlsafe(40)
    add("flask-secret", f'app.config["SECRET_KEY"] = "{secret}"', [secret])
    secret = urlsafe(60)
    add("camel-access-token", json.dumps({"accessToken": secret, "expiresIn": 3600}), [secret])
    secret = urlsafe(60)
    add("camel-refresh-token", json.dumps({"refreshToken": secret}), [secret])
    secret = urlsafe(40)
    add("camel-client-secret", json.dumps({"clientId": "web", "clientSecret": secret}), [secret])
    secret = password()
    add(
        "k8s-env-list",
        json.dumps(
            {
                "env": [
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "DB_PASSWORD", "value": secret},
                ]
            }
        ),
        [secret],
    )
    secret = b64(40)
    add(
        "k8s-env-list-token",
        json.dumps([{"name": "GITHUB_TOKEN", "value": secret}]),
        [secret],
    )
    secret = password()
    add("compose-env", f"environment:\n  - POSTGRES_PASSWORD={secret}\n  - TZ=UTC", [secret])
    secret = password()
    add("xml-password", f"<db><user>app</user><password>{secret}</password></db>", [secret])
    secret = password()
    add("dotnet-config", f'<add key="Password" value="{secret}" />', [secret])
    secret = password()
    add(
        "dotnet-connection-string",
        f"Server=db;Database=app;User Id=app;Password={secret};",
        [secret],
    )
    secret = password()
    add("php-variable", f"$db_pass = '{secret}';", [secret])
    secret = password()
    add("php-define", f"define('DB_PASSWORD', '{secret}');", [secret])
    secret = password()
    add("php-array", f"'password' => '{secret}',", [secret])
    secret = password()
    add("go-struct", f'cfg := Config{{User: "app", Password: "{secret}"}}', [secret])
    secret = password()
    add("go-assign", f'dbPassword := "{secret}"', [secret])
    secret = password()
    add("yaml-password", f"database:\n  user: app\n  password: {secret}\n", [secret])
    secret = password()
    add(
        "html-password-input",
        f'<input type="password" name="pw" value="{secret}">',
        [secret],
    )
    secret = password()
    add("toml-password", f'[db]\npassword = "{secret}"', [secret])
    secret = password()
    add("ini-passwd", f"[client]\nuser=app\npasswd={secret}", [secret])
    secret = password()
    add("argv-long-password", f"mysqladmin --user=root --password {secret} status", [secret])
    secret = password()
    add("argv-long-password-eq", f"pg_dump --password={secret} app", [secret])
    secret = password()
    add("argv-sshpass", f"sshpass -p {secret} ssh deploy@host", [secret])
    secret = password()
    add("argv-mysql-glued", f"mysql -u root -p{secret} app", [secret])
    secret = password()
    add("argv-redis-cli", f"redis-cli -h cache -a {secret} ping", [secret])
    secret = password()
    add("argv-curl-user", f"curl -u admin:{secret} https://api.example.com/", [secret])
    secret = urlsafe(40)
    add("argv-token-flag", f"deploy --token {secret} --env prod", [secret])
    secret = urlsafe(40)
    add("argv-api-key-flag", f"client --api-key={secret}", [secret])
    secret = password()
    add("argv-docker-login", f"docker login -u bot -p {secret} registry.example.com", [secret])
    secret = password()
    add("url-userinfo", f"postgres://app:{secret}@db.internal:5432/app", [secret])
    secret = password()
    add("url-empty-user", f"redis://:{secret}@cache.internal:6379/0", [secret])
    left, right = alnum(8), alnum(8)
    add("url-at-in-password", f"https://bot:{left}@{right}@git.example.com/repo.git", [left, right])
    secret = password()
    add("url-encoded-password", f"amqp://app:{secret}%40x@mq.internal/", [secret])
    secret = "ghp_" + alnum(36)
    add("url-token-user", f"https://{secret}@github.com/org/repo.git", [secret[4:]])
    secret = password()
    add("mongodb-srv", f"mongodb+srv://app:{secret}@cluster0.example.mongodb.net/db", [secret])
    secret = password()
    add("jdbc-password", f"jdbc:mysql://db:3306/app?user=app&password={secret}", [secret])
    secret = password()
    add("netrc", f"machine api.example.com\n  login bob\n  password {secret}\n", [secret])
    secret = password()
    add("netrc-one-line", f"machine git.example.com login bob password {secret}", [secret])
    secret = password()
    add("pgpass", f"db.internal:5432:app:app:{secret}", [secret])
    secret = "npm_" + alnum(36)
    add("npmrc", f"//registry.npmjs.org/:_authToken={secret}\n", [secret[4:]])
    secret = b64(40)
    add("npmrc-auth", f"//npm.example.com/:_auth={secret}", [secret])
    secret = base64.b64encode(f"bot:{password()}".encode()).decode()
    add(
        "docker-config-auth",
        json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": secret}}}),
        [secret[4:]],
    )
    secret = alnum(32)
    add(
        "cookie-jar",
        f"# Netscape HTTP Cookie File\n.example.com\tTRUE\t/\tTRUE\t1790000000\tsessionid\t{secret}",
        [secret],
    )
    secret = urlsafe(40)
    add("set-cookie", f"Set-Cookie: __Host-sid={secret}; Path=/; Secure; HttpOnly", [secret])
    secret = password()
    add("json-pw", json.dumps({"user": "bob", "pw": secret}), [secret])
    secret = password()
    add("json-passwd", json.dumps({"passwd": secret}), [secret])
    secret = "ghp_" + alnum(36)
    add("glued-github-token", f"ref=mainxyz{secret}", [secret[4:]])
    secret = "sk-ant-api03-" + urlsafe(93) + "AA"
    add("glued-anthropic-key", f"chunk0017{secret}", [secret[13:50]])
    secret = "AKIA" + pick(UPPER + "234567", 16)
    add("glued-aws-key", f"blob_{secret}_end", [secret[4:]])
    secret = base64.b64encode(f"admin:{password()}".encode()).decode()
    add("basic-auth-header", f"Authorization: Basic {secret}", [secret[4:]])
    secret = urlsafe(48)
    add("bearer-header", f"Authorization: Bearer {secret}", [secret])
    secret = urlsafe(40)
    add("x-api-key-header", f"X-API-Key: {secret}", [secret])
    secret = b64(24)
    add("proxy-authorization", f"Proxy-Authorization: Basic {secret}", [secret])
    secret = urlsafe(32)
    add("query-api-key", f"GET /v1/data?api_key={secret}&format=json", [secret])
    sig = hexs(64)
    add(
        "aws-presigned-url",
        f"https://bucket.s3.amazonaws.com/f?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={sig}",
        [sig],
    )
    secret = alnum(32)
    add("entropy-after-word", f"the new secret is {secret} keep it safe", [secret])
    secret = alnum(40)
    add("entropy-api-key-prose", f"Use this API key: {secret}", [secret])
    secret = b64(200)
    add(
        "kubeconfig",
        f"users:\n- name: admin\n  user:\n    client-key-data: {secret}\n    token: {alnum(40)}",
        [secret[:40]],
    )
    secret = password()
    add("ssh-passphrase", f"passphrase: {secret}", [secret])
    secret = password()
    add("smtp-password", f"SMTP_PASS={secret}", [secret])
    secret = urlsafe(27)
    add("cloudinary-url", f"CLOUDINARY_URL=cloudinary://123456789012345:{secret}@demo", [secret])
    secret = urlsafe(39)
    add(
        "firebase-config", f'const cfg = {{ apiKey: "AIza{secret}", projectId: "demo" }};', [secret]
    )
    secret = alnum(40)
    add("cloudflare-token", f"CLOUDFLARE_API_TOKEN={secret}", [secret])
    secret = password()
    add("htpasswd-form", f"user=admin&pass={secret}&remember=1", [secret])
    secret = password()
    add("spring-datasource", f"spring.datasource.password={secret}", [secret])
    secret = urlsafe(40)
    add("private-token-header", f"PRIVATE-TOKEN: {secret}", [secret])
    secret = urlsafe(40)
    add("x-auth-token-header", f"X-Auth-Token: {secret}", [secret])
    secret = password()
    add("auth-json", json.dumps({"auth": {"username": "bot", "password": secret}}), [secret])
    secret = urlsafe(40)
    add("signing-key", f"WEBHOOK_SIGNING_KEY={secret}", [secret])
    secret = urlsafe(40)
    add("encryption-key", f"encryptionKey: '{secret}'", [secret])
    secret = urlsafe(40)
    add("master-key", f"RAILS_MASTER_KEY={secret}", [secret])
    secret = urlsafe(40)
    add("api-key-spaced", f"api key = {secret}", [secret])
    return found


ENV_NAME = "CAPSEM_NOTE"


def placements(snippet: str) -> dict[str, str]:
    """The same snippet where a ledger carries it."""
    return {
        "plain": f"Here is what the command printed:\n{snippet}\nDone, 3 files changed.",
        "json": json.dumps({"role": "tool", "content": [{"type": "text", "text": snippet}]}),
        "header": (
            "POST /v1/messages HTTP/1.1\r\nhost: api.example.com\r\n"
            f"x-debug-note: {snippet}\r\ncontent-type: application/json\r\n"
        ),
        "argv": json.dumps(["sh", "-c", f"echo {shlex.quote(snippet)} > /tmp/out"]),
        "env": f"HOME=/root\nPATH=/usr/bin:/bin\n{ENV_NAME}={snippet}\nLANG=C.UTF-8\n",
    }


def main() -> None:
    rows = []
    seen = set()
    for kind, snippet, secrets in kinds():
        assert kind not in seen, kind
        seen.add(kind)
        for secret in secrets:
            assert len(secret) >= 8 and secret in snippet, (kind, secret)
        for placement, text in placements(snippet).items():
            rows.append({"kind": kind, "placement": placement, "text": text, "secrets": secrets})
    with OUT.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(seen)} kinds, {len(rows)} samples -> {OUT}")


if __name__ == "__main__":
    main()
