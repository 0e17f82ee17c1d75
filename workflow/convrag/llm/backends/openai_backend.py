"""OpenAI-compatible backend (OpenAI API, ``vllm serve``, other gateways), async and bounded.

Why its own retry loop: the client's built-in retries are switched off (``max_retries=0``)
so that the policy is one visible, testable loop: exponential backoff with jitter (and the
server's Retry-After when given) on 429, 5xx, timeouts, connection errors and malformed
bodies; other HTTP errors (400/401/403/404...) fail at once. After the last attempt a
ModelError says what went wrong. At most ``spec.concurrency`` requests are in flight.

The key is read only from the environment variable named by ``spec.api_key_env``; it is
never logged and is scrubbed from error messages.

Label log-probs are an APPROXIMATION: a 1-token completion with ``top_logprobs=20``; a
label's score is the log-sum-exp of the top tokens that are a prefix of the label (leading
whitespace ignored), i.e. the log-probability of the label's first token(s) only. A label
absent from the top 20 gets the smallest top log-prob seen (an upper bound).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
from concurrent.futures import ThreadPoolExecutor

from convrag.errors import ModelError
from convrag.llm.backends.vllm_backend import request_seed
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response

log = logging.getLogger(__name__)
TOP_LOGPROBS = 20


class _Malformed(Exception):
    """The server answered 200 with a body we cannot use."""


def label_scores(top: list[tuple[str, float]], labels: tuple[str, ...]) -> dict[str, float]:
    """Approximate log p(label) from the first token's top log-probs (see module doc)."""
    floor = min((lp for _, lp in top), default=-1e4)
    out = {}
    for lab in labels:
        hits = [lp for tok, lp in top if tok.lstrip() and lab.startswith(tok.lstrip())]
        if hits:
            m = max(hits)
            out[lab] = m + math.log(sum(math.exp(h - m) for h in hits))
        else:
            out[lab] = floor
    return out


def _run(coro):
    """Run a coroutine from sync code, also when an event loop is already running (notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


class OpenAIBackend:
    def __init__(self, spec: ModelSpec, backoff_base_s: float = 1.0, backoff_cap_s: float = 60.0):
        import openai  # noqa: F401  (fail early if missing)

        self.spec = spec
        self.backoff_base_s, self.backoff_cap_s = backoff_base_s, backoff_cap_s
        key = os.environ.get(spec.api_key_env or "")
        if not key:
            raise ModelError(f"{spec.name}: environment variable {spec.api_key_env} is not set; "
                             f"the API key for this model is read only from there")
        self._key = key
        # a base URL may name environment variables (``${CONVRAG_MINIATURE_API}``: the loopback
        # endpoint `convrag miniature` starts); one left unset is an error here, not a bad request later
        self._base_url = os.path.expandvars(spec.base_url) if spec.base_url else spec.base_url
        if self._base_url and "$" in self._base_url:
            raise ModelError(f"{spec.name}: base_url {spec.base_url!r} names an environment variable that is not set")

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend({self.spec.name!r}, base_url={self.spec.base_url!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    # -- request mapping -----------------------------------------------------------------
    def request_kwargs(self, r: Request) -> dict:
        kw = dict(model=self.spec.api_model, messages=r.chat, seed=request_seed(r.seed, r.sample_index))
        if r.labels is not None:
            kw.update(max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS)
        else:
            kw.update(max_tokens=r.sampling.max_tokens, temperature=r.sampling.temperature,
                      top_p=r.sampling.top_p)
            if r.sampling.stop:
                kw["stop"] = list(r.sampling.stop)
        if r.json_mode:
            kw["response_format"] = {"type": "json_object"}
        if self.spec.chat_template_kwargs:  # `vllm serve` reads them from the request body
            kw["extra_body"] = {"chat_template_kwargs": dict(self.spec.chat_template_kwargs)}
        return kw

    def parse(self, r: Request, resp) -> Response:
        try:
            choice = resp.choices[0]
            usage = getattr(resp, "usage", None)
            pt = int(getattr(usage, "prompt_tokens", 0) or 0)
            ct = int(getattr(usage, "completion_tokens", 0) or 0)
            if r.labels is not None:
                first = choice.logprobs.content[0]
                top = [(t.token, float(t.logprob)) for t in (first.top_logprobs or [])]
                top = top or [(first.token, float(first.logprob))]
                scores = label_scores(top, r.labels)
                return Response(text=max(scores, key=scores.get), prompt_tokens=pt, completion_tokens=ct,
                                finish_reason="label", label_logprobs=scores, cached=False)
            text = choice.message.content
            if text is None and not choice.finish_reason:
                raise _Malformed("no content and no finish_reason")
            reason = "length" if choice.finish_reason == "length" else "stop"
            return Response(text=text or "", prompt_tokens=pt, completion_tokens=ct, finish_reason=reason,
                            label_logprobs=None, cached=False)
        except _Malformed:
            raise
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
            raise _Malformed(f"unusable response body ({type(e).__name__}: {e})") from e

    # -- calling -------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Response]:
        return _run(self._generate_all(requests))

    async def _generate_all(self, requests: list[Request]) -> list[Response]:
        import openai

        client = openai.AsyncOpenAI(api_key=self._key, base_url=self._base_url, max_retries=0,
                                    timeout=self.spec.timeout_s)
        sem = asyncio.Semaphore(self.spec.concurrency)
        tasks = [asyncio.create_task(self._one(client, sem, r)) for r in requests]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in pending:
                t.cancel()
            for t in tasks:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise t.exception()
            return [t.result() for t in tasks]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.backoff_cap_s, self.backoff_base_s * 2 ** attempt) * (0.5 + random.random())
        if retry_after is not None:
            d = max(d, min(retry_after, self.backoff_cap_s))
        return d

    async def _one(self, client, sem: asyncio.Semaphore, r: Request) -> Response:
        import openai

        kw = self.request_kwargs(r)
        attempts = self.spec.max_retries + 1
        last = "no attempt made"
        for attempt in range(attempts):
            retry_after = None
            async with sem:
                try:
                    return self.parse(r, await client.chat.completions.create(**kw))
                except openai.APIStatusError as e:
                    status = e.status_code
                    last = f"HTTP {status} {type(e).__name__}: {self._scrub(str(e.message))}"
                    if status not in (408, 409, 429) and status < 500:
                        raise ModelError(f"{self.spec.name}: request rejected ({last})") from None
                    ra = e.response.headers.get("retry-after") if e.response is not None else None
                    try:
                        retry_after = float(ra) if ra is not None else None
                    except ValueError:
                        retry_after = None
                except (openai.APIConnectionError, openai.APIResponseValidationError, json.JSONDecodeError,
                        _Malformed) as e:
                    last = f"{type(e).__name__}: {self._scrub(str(e))}"
            if attempt + 1 < attempts:
                delay = self._delay(attempt, retry_after)
                log.warning("%s: attempt %d/%d failed (%s); retrying in %.2f s",
                            self.spec.name, attempt + 1, attempts, last, delay)
                await asyncio.sleep(delay)
        raise ModelError(f"{self.spec.name}: giving up after {attempts} attempts at {self._base_url}: {last}")
