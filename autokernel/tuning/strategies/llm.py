"""The llm strategy: any OpenAI-compatible model proposes configs from the history; and
``auto``, where the LLM's proposals seed optuna's TPE.

Settings come from the environment and a ``.env`` file (found from the working directory,
never overriding variables already set): ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (vLLM,
Ollama, llama.cpp and other OpenAI-compatible servers), ``AUTOKERNEL_LLM_MODEL``.

A reply is checked config by config (JSON, keys, ranges, the space's rules, duplicates);
what fails is sent back once with the reasons, then dropped. When the LLM cannot answer
(timeout, connection, HTTP errors after the SDK's own retries), the fallback strategy
fills the generation and tuning goes on. The API key is scrubbed from every text this
module surfaces.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autokernel import knobs
from autokernel.config import ConfigError, KernelConfig
from autokernel.records import Trial
from autokernel.tuning.space import PARAMS, SearchSpace, config_key
from autokernel.tuning.strategies import llm_prompt, make_strategy
from autokernel.tuning.strategies.base import Strategy, StrategyBase, tried_keys
from autokernel.tuning.strategies.optuna_tpe import OptunaStrategy

# openai and python-dotenv are optional: imported where a run first needs them.

if TYPE_CHECKING:
    import openai

# A local model writing n configs with rationales takes tens of seconds; past two minutes
# something is wrong, and the fallback should take over.
DEFAULT_TIMEOUT_S = 120.0
# The SDK's own retries of 408/409/429/5xx and connection errors, with backoff.
DEFAULT_MAX_RETRIES = 2
# Used only against api.openai.com when no model is named; other servers are asked.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
# Consecutive generations the LLM may fail before the fallback takes over for good.
GIVE_UP_AFTER = 3
# How the reply is constrained, strictest first; a server that rejects one (HTTP 400/422)
# gets the next, and the one that worked is kept for that server (its base URL) for the
# rest of the process: `loop` makes a strategy per problem.
MODES = ("json_schema", "json_object", "text")
_MODE_BY_SERVER: dict[str, str] = {}
_RATIONALE_CHARS = 200
_REASON_CHARS = 240
_MIN_SECRET_CHARS = 6  # a shorter "key" (a placeholder) would scrub ordinary words
# OpenAI echoes a wrong key masked ("sk-abc1****wxyz"): its visible ends are the key's.
_MASKED_KEY = re.compile(r"sk-[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*")


def load_settings() -> None:
    """Read a ``.env`` found from the working directory; variables already set win."""
    from dotenv import find_dotenv, load_dotenv

    load_dotenv(find_dotenv(usecwd=True), override=False)


def llm_configured() -> bool:
    """True when the environment names a key or a server for the LLM."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def scrub(text: str, secrets: Sequence[str | None]) -> str:
    """``text`` with every secret (and OpenAI's masked echo of a key) replaced by ***."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_CHARS:
            text = text.replace(secret, "***")
    return _MASKED_KEY.sub("***", text)


class LLMError(Exception):
    """The LLM gave no usable answer. ``permanent``: retrying cannot help (bad key, no
    such model), so the fallback takes over for the rest of the run."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class LLMStrategy(StrategyBase):
    """Asks an OpenAI-compatible model for configs (see the module docstring).

    After each ``propose``: ``notes`` maps ``config_key(config)`` to the rationale of each
    config proposed (the tuner stores it in the history's ``note``); ``last_stats`` holds
    ``prompt_tokens``, ``completion_tokens``, ``latency_s`` (LLM calls of that propose,
    repair included), ``fallback`` (configs the fallback strategy filled) and ``rejected``.
    ``events`` is an append-only log of what went wrong or changed, one line each, for
    the CLI to print (print ``events[seen:]`` after each generation).

    ``client``: an ``openai.OpenAI`` to use (tests inject one); otherwise one is built from
    the environment with ``timeout`` and ``max_retries``. ``fallback`` fills what the LLM
    cannot give (default: the random strategy with ``seed``). Unlike the other strategies a
    seed does not make it reproducible: it is passed to the server, which may honour it.
    """

    name = "llm"

    def __init__(self, *, model: str | None = None, client: "openai.OpenAI | None" = None,
                 seed: int | None = None, fallback: Strategy | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, max_retries: int = DEFAULT_MAX_RETRIES,
                 temperature: float | None = None) -> None:
        if client is None and not llm_configured():
            raise ValueError("the llm strategy needs OPENAI_API_KEY or OPENAI_BASE_URL "
                             "(in the environment or a .env file)")
        self.seed = seed
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max_retries
        self.events: list[str] = []
        self.notes: dict[tuple, str] = {}
        self.last_stats: dict[str, Any] | None = None
        self._model = model or os.environ.get("AUTOKERNEL_LLM_MODEL") or None
        self._client = client
        self._fallback = fallback
        self._failures = 0
        self.gave_up = False

    # -- settings --------------------------------------------------------------------

    @property
    def fallback(self) -> Strategy:
        if self._fallback is None:
            self._fallback = make_strategy("random", seed=self.seed)
        return self._fallback

    @property
    def client(self) -> "openai.OpenAI":
        if self._client is None:
            try:
                import openai
            except ImportError as exc:  # a missing or broken install: the fallback proposes instead
                raise LLMError(f"the openai package cannot be imported ({exc}); install it with pip install openai",
                               permanent=True) from None

            # Local servers need no key, but the SDK refuses to start without one.
            key = os.environ.get("OPENAI_API_KEY") or "unused"
            try:
                self._client = openai.OpenAI(api_key=key, timeout=self.timeout, max_retries=self.max_retries)
            except openai.OpenAIError as exc:
                raise LLMError(self._scrub(str(exc)), permanent=True) from None
        return self._client

    def _scrub(self, text: str) -> str:
        client = self._client
        url = getattr(client, "base_url", None)
        return scrub(text, [os.environ.get("OPENAI_API_KEY"), getattr(client, "api_key", None),
                            getattr(url, "password", None)])

    def model(self) -> str:
        """The model named by option or AUTOKERNEL_LLM_MODEL; else the one a local server
        serves (vLLM and Ollama reject other names), or DEFAULT_OPENAI_MODEL on OpenAI."""
        if self._model is None:
            client = self.client
            if client.base_url.host == "api.openai.com":
                self._model = DEFAULT_OPENAI_MODEL
            else:
                served = [m.id for m in self._call(client.models.list)]
                if not served:
                    raise LLMError(f"the server at {client.base_url} serves no model; set AUTOKERNEL_LLM_MODEL",
                                   permanent=True)
                self._model = served[0]
                self.events.append(f"llm: using model {self._model!r}, the first the server lists")
        return self._model

    # -- the Strategy protocol -------------------------------------------------------

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        self.notes = {}
        stats: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0,
                                 "fallback": 0, "rejected": 0}
        self.last_stats = stats
        if n <= 0:
            return []
        proposed: list[tuple[KernelConfig, str]] = []
        why_short = None  # why the LLM gave fewer than n this time, if it was asked
        if not self.gave_up:
            try:
                proposed = self._ask(space, history, n, stats)
                self._failures = 0
                why_short = f"the LLM gave {len(proposed)} valid configs of {n}"
            except LLMError as exc:
                self._failures += 1
                why_short = f"the LLM failed: {exc}"
                if exc.permanent or self._failures >= GIVE_UP_AFTER:
                    self.gave_up = True
                    why_short += f"; {self.fallback.name} proposes from now on"
        configs = [c for c, _ in proposed]
        self.notes = {config_key(c): self._scrub(note) for c, note in proposed}
        if len(configs) < n:
            filled = self._fill(space, history, configs, n - len(configs))
            stats["fallback"] = len(filled)
            configs += filled
            if why_short is not None:
                self.events.append(f"llm: {why_short}; {self.fallback.name} filled {len(filled)}")
        return configs

    def _fill(self, space: SearchSpace, history: Sequence[Trial], taken: list[KernelConfig],
              wanted: int) -> list[KernelConfig]:
        taken_keys = {config_key(c) for c in taken}
        extra = [c for c in self.fallback.propose(space, history, wanted + len(taken))
                 if config_key(c) not in taken_keys][:wanted]
        for config in extra:
            self.notes[config_key(config)] = f"{self.fallback.name} (LLM fallback)"
        return extra

    # -- talking to the model --------------------------------------------------------

    def _ask(self, space: SearchSpace, history: Sequence[Trial], n: int,
             stats: dict[str, Any]) -> list[tuple[KernelConfig, str]]:
        """Valid configs with rationales from one request and at most one repair."""
        messages = [
            {"role": "system", "content": llm_prompt.SYSTEM_PROMPT},
            {"role": "user", "content": llm_prompt.user_prompt(space, history, n, llm_prompt.Device.current(space))},
        ]
        reply = self._complete(messages, space, stats)
        taken = tried_keys(history)
        accepted, reasons = check_reply(reply, space, taken, n)
        stats["rejected"] += len(reasons)
        if not reasons or len(accepted) == n:
            return accepted
        wanted = n - len(accepted)
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": llm_prompt.repair_prompt(reasons, wanted)}]
        try:
            repair = self._complete(messages, space, stats)
        except LLMError as exc:
            self.events.append(f"llm: the repair request failed: {exc}")
            return accepted
        taken |= {config_key(c) for c, _ in accepted}
        fixed, dropped = check_reply(repair, space, taken, wanted)
        stats["rejected"] += len(dropped)
        self.events.append(self._scrub(
            f"llm: {len(reasons)} rejected ({'; '.join(reasons)[:_REASON_CHARS]}), sent back once: "
            f"{len(fixed)} replacements accepted" + (f", {len(dropped)} dropped" if dropped else "")))
        return accepted + fixed

    def _complete(self, messages: list[dict], space: SearchSpace, stats: dict[str, Any]) -> str:
        """The text of one chat completion, in the strictest reply mode the server takes."""
        model = self.model()
        server = str(self.client.base_url)
        # Once a mode has answered, a 400 is a real error, not the mode's fault.
        works = server in _MODE_BY_SERVER
        mode = _MODE_BY_SERVER.get(server, MODES[0])
        while True:
            kwargs: dict[str, Any] = {}
            if mode == "json_schema":
                kwargs["response_format"] = llm_prompt.response_format(space)
            elif mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            if self.seed is not None:
                kwargs["seed"] = self.seed
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
            start = time.perf_counter()
            try:
                response = self._call(self.client.chat.completions.create, model=model, messages=messages,
                                      downgrade=not works and mode != MODES[-1], **kwargs)
            except _Rejected as exc:
                following = MODES[MODES.index(mode) + 1]
                self.events.append(f"llm: the server rejected response_format {mode} ({exc}); using {following}")
                mode = following
                continue
            finally:
                stats["latency_s"] += time.perf_counter() - start
            _MODE_BY_SERVER[server] = mode
            if response.usage is not None:
                stats["prompt_tokens"] += response.usage.prompt_tokens or 0
                stats["completion_tokens"] += response.usage.completion_tokens or 0
            if not response.choices:
                raise LLMError("the server sent no choices")
            message = response.choices[0].message
            if getattr(message, "refusal", None):
                raise LLMError(self._scrub(f"the model refused: {message.refusal}"[:_REASON_CHARS]))
            return message.content or ""

    def _call(self, fn: Callable, *args: Any, downgrade: bool = False, **kwargs: Any) -> Any:
        """``fn`` with the SDK's errors turned into LLMError (scrubbed); a 400/422 becomes
        _Rejected where the reply mode may be to blame."""
        import openai

        try:
            return fn(*args, **kwargs)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if downgrade:
                raise _Rejected(self._describe(exc)) from None
            raise LLMError(self._describe(exc)) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
            raise LLMError(self._describe(exc), permanent=True) from None
        except openai.OpenAIError as exc:
            raise LLMError(self._describe(exc)) from None

    def _describe(self, exc: Exception) -> str:
        import openai

        retried = f" (after {self.client.max_retries} retries)" if self.client.max_retries else ""
        if isinstance(exc, openai.APITimeoutError):
            text = f"no reply within {self.client.timeout} s{retried}"
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            text = f"cannot reach {self.client.base_url}{retried}: {cause or exc}"
        elif isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            message = body.get("message") or exc.response.text or exc.response.reason_phrase
            retried = retried if exc.status_code == 429 or exc.status_code >= 500 else ""
            text = f"HTTP {exc.status_code}{retried}: {message}"
        else:
            text = str(exc)
        return self._scrub(" ".join(text.split())[:_REASON_CHARS])


class _Rejected(Exception):
    """The server refused the request's response_format."""


def _parse_json(reply: str) -> Any:
    """The JSON of a reply; failing that, the object inside it (models in plain-text mode
    wrap it in prose or code fences)."""
    try:
        return json.loads(reply)
    except json.JSONDecodeError:
        start, end = reply.find("{"), reply.rfind("}")
        if start == -1 or end <= start:
            raise
        return json.loads(reply[start:end + 1])


def check_reply(reply: str, space: SearchSpace, taken: set[tuple], n: int) -> tuple[list[tuple[KernelConfig, str]], list[str]]:
    """The first ``n`` valid, new configs of a reply with their rationales, and a reason
    for each part rejected (malformed JSON, unknown or missing keys, values outside the
    space or its rules, configs repeated or already in ``taken``)."""
    try:
        data = _parse_json(reply)
    except json.JSONDecodeError as exc:
        return [], [f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"]
    items = data.get("configs") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return [], ['the reply must be a JSON object {"configs": [...]} holding a list of configs']
    accepted: list[tuple[KernelConfig, str]] = []
    reasons: list[str] = []
    seen = set(taken)
    for item in items:
        if len(accepted) == n:
            break
        label = json.dumps(item, separators=(",", ":"))[:120]
        config, why = _check_item(item, space)
        if config is not None and config_key(config) in seen:
            why = "already tried" if config_key(config) in taken else "repeated in this reply"
        if why is not None:
            reasons.append(f"{label}: {why}")
            continue
        seen.add(config_key(config))
        rationale = item.get("rationale")
        accepted.append((config, " ".join(str(rationale).split())[:_RATIONALE_CHARS] if rationale else ""))
    return accepted, reasons


_MAY_OMIT = {k.name: k.default for k in knobs.KNOBS if k.option}
"""Fields a reply may leave out, with their value: the options of one kernel alone (a model
that knows no split-K, stream-K or Hopper options means none)."""


def _check_item(item: Any, space: SearchSpace) -> tuple[KernelConfig | None, str | None]:
    if not isinstance(item, dict):
        return None, "a config must be a JSON object"
    unknown = sorted(set(item) - set(PARAMS) - {"rationale"})
    if unknown:
        return None, f"unknown keys {', '.join(unknown)}"
    missing = [name for name in PARAMS if name not in item and name not in _MAY_OMIT]
    if missing:
        return None, f"missing {', '.join(missing)}"
    try:
        config = KernelConfig.from_dict({name: item.get(name, _MAY_OMIT.get(name)) for name in PARAMS})
    except ConfigError as exc:
        return None, str(exc)
    return config, space.why_invalid(config)


class AutoStrategy(StrategyBase):
    """The default: the LLM proposes the first ``llm_generations`` generations, then optuna's
    TPE, warm-started from the history (LLM trials included), refines them. Without an LLM
    (``llm`` None) TPE alone. If the LLM fails, TPE fills its generation."""

    name = "auto"

    def __init__(self, tpe: Strategy, llm: LLMStrategy | None = None, llm_generations: int = 1) -> None:
        self.tpe = tpe
        self.llm = llm
        self.llm_generations = llm_generations
        self.events: list[str] = llm.events if llm is not None else []
        self.notes: dict[tuple, str] = {}
        self.last_stats: dict[str, Any] | None = None
        self._generations = 0
        if llm is None:
            self.events.append("auto: no OPENAI_API_KEY or OPENAI_BASE_URL, so optuna's TPE proposes alone")

    @property
    def history_pure(self) -> bool:
        """Without an LLM its proposals are TPE's, which follow from the seed, space and history."""
        return self.llm is None and self.tpe.history_pure

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        self._generations += 1
        if self.llm is not None and self._generations <= self.llm_generations and not self.llm.gave_up:
            configs = self.llm.propose(space, history, n)
            self.notes, self.last_stats = self.llm.notes, self.llm.last_stats
            return configs
        if self.llm is not None and self._generations == self.llm_generations + 1:
            self.events.append("auto: the LLM's proposals seeded the history; optuna's TPE refines from here")
        self.notes, self.last_stats = {}, None
        return self.tpe.propose(space, history, n)


def make_llm_strategy(name: str, *, seed: int | None = None, llm_generations: int = 1, **options: Any) -> Strategy:
    """``llm``: an LLMStrategy (``options``: model, client, fallback, timeout, max_retries,
    temperature). ``auto``: an AutoStrategy, with the LLM where a key or base URL is set."""
    load_settings()
    if name == "llm":
        return LLMStrategy(seed=seed, **options)
    if name != "auto":
        raise ValueError(f"make_llm_strategy makes llm or auto, not {name!r}")
    # Three quarters of each generation from the best configs' neighbours: on the replayed H100
    # sweep (tests/data), TPE alone reached the 1024x4096x4096 optimum (two steps from the
    # default) within 24 trials in 2 of 5 seeds, this mix in 10 of 10 (the share was chosen there).
    tpe = OptunaStrategy(seed=seed, exploit=0.75)
    if options.get("client") is None and not llm_configured():
        return AutoStrategy(tpe)
    return AutoStrategy(tpe, LLMStrategy(seed=seed, fallback=tpe, **options), llm_generations)
