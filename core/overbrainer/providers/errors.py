"""What a request to a provider can end in, short of a reply.

Messages are safe to show: they never hold a key, and the text of a 401 or 403 reply (which
can quote the key) is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overbrainer.errors import UserError

if TYPE_CHECKING:
    from overbrainer.providers.ratelimit import RateInfo


class ProviderError(Exception):
    """A request that gave no usable reply: the item fails, the stage goes on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TransientProviderError(ProviderError):
    """A request worth sending again (408, 429, >= 500, transport): ``retry_after`` is the
    wait the provider asked for, in seconds, if it asked; ``billable``: the request was
    sent and its reply never came (a timeout, a dropped connection), so the provider may
    have billed it. (A target's retryable failure is ``overbrainer.errors.TransientError``.)"""

    def __init__(
        self, message: str, retry_after: float | None = None, *, billable: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.billable = billable


class RateLimitedError(TransientProviderError):
    """A 429: the provider's queue, not a failure. It is waited out (the limiter paces every
    request after it) and does not count against ``max_retries``."""

    def __init__(self, message: str, info: RateInfo) -> None:
        super().__init__(message, info.retry_after)
        self.info = info


class FatalProviderError(UserError):
    """A failure no other item would escape (401 to 404, an unsupported request): the
    stage stops, keeping what it completed. A ``UserError``, not a ``ProviderError``: each
    ``except ProviderError`` fails one item and goes on, which this must not do."""
