"""One request's timestamps and the times of its output tokens.

Everything the steady-state window and the per-request energy split read about a request is
here, in unix seconds (``time.time()``, the clock Zeus stamps its windows with).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestTiming:
    """What the client saw of one streamed request.

    Attributes:
        index: Position in the send order (0-based).
        sent_s: Unix time the request was sent.
        first_token_s: Unix time the first output token arrived (``None``: never).
        end_s: Unix time the stream ended (``None``: still running).
        chunk_times_s: Arrival time of every streamed chunk that carried output text.
        output_tokens: Output tokens (the server's count when it reports usage, else chunks).
        prompt_tokens: Prompt tokens (the server's count when reported, else an estimate).
        prompt_tokens_reported: Whether ``prompt_tokens`` came from the server.
        finish_reason: The server's finish reason (``length``, ``stop``...), if given.
        error: Why the request failed (``None``: it succeeded).
    """

    index: int
    sent_s: float
    first_token_s: float | None = None
    end_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    prompt_tokens_reported: bool = False
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the request finished with at least one token and no error."""
        return self.error is None and self.end_s is not None and self.first_token_s is not None

    def token_times_s(self) -> list[float]:
        """Arrival time of each output token, ``output_tokens`` of them.

        Engines may send several tokens in one chunk (or hold back bytes of an incomplete
        character), so chunks and tokens differ: each chunk counts one token at its arrival,
        and tokens the server counted beyond the chunks are spread evenly between the first
        token and the end of the stream.
        """
        times = list(self.chunk_times_s[: self.output_tokens])
        missing = self.output_tokens - len(times)
        if missing > 0 and self.first_token_s is not None and self.end_s is not None:
            a, b = self.first_token_s, self.end_s
            times += [a + (b - a) * (k + 1) / (missing + 1) for k in range(missing)]
        return sorted(times)

    def itls_s(self) -> list[float]:
        """Gaps between consecutive chunks in seconds (inter-token latency as streamed)."""
        c = self.chunk_times_s
        return [c[i] - c[i - 1] for i in range(1, len(c))]
