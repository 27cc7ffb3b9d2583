import logging

import pytest

from backend.infrastructure.logging import SecretMaskingFilter, mask_secrets


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdef123456", "abcdef123456"),
        ("api_key=sk-live-0123456789abcdef", "sk-live-0123456789abcdef"),
        ("dsn=postgresql://app:s3cr3t-pw@db:5432/chat", "s3cr3t-pw"),
        ('{"password": "hunter22"}', "hunter22"),
        ("x-api-key: key-for-alice", "key-for-alice"),
    ],
)
def test_credential_shapes_are_masked(text: str, secret: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked
    assert "***" in masked


def test_known_secret_values_are_masked_anywhere() -> None:
    assert mask_secrets("connecting with abc-unusual-value now", ["abc-unusual-value"]) == "connecting with *** now"


def test_filter_masks_messages_args_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.secrets")
    logger.addFilter(SecretMaskingFilter(["topsecretvalue"]))
    with caplog.at_level(logging.INFO, logger="test.secrets"):
        logger.info("calling model with key %s", "topsecretvalue")
        try:
            raise RuntimeError("failed with topsecretvalue")
        except RuntimeError:
            logger.exception("model call failed")
    text = caplog.text
    assert "topsecretvalue" not in text
    assert text.count("***") >= 2
