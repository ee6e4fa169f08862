"""The llm and auto strategies with the real openai client against a local HTTP server
(tests/tuning/llm_server.py): good replies, malformed JSON, configs out of the space repaired once
then dropped, a 429 then success, a timeout, a server that rejects json_schema, and the
API key absent from everything the strategy surfaces or the history stores."""

from __future__ import annotations

import json
import logging
import time

import openai
import pytest

from tests.tuning.llm_server import LLMServer, Reply, config_reply

from autokernel.history import History, make_row, new_run_id
from autokernel.records import Problem, Trial
from autokernel.tuning.space import SearchSpace, config_key
from autokernel.tuning.strategies.base import fresh
from autokernel.tuning.strategies import llm as llm_module
from autokernel.tuning.strategies.llm import (
    GIVE_UP_AFTER, AutoStrategy, LLMStrategy, check_reply, make_llm_strategy, scrub,
)

KEY = "sk-test-0123456789abcdef-SECRET-key"
ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AUTOKERNEL_LLM_MODEL")


class InOrder:
    """A deterministic stand-in fallback: the space's untried configs in order."""

    def __init__(self, name: str = "inorder") -> None:
        self.name = name
        self.calls = 0

    def propose(self, space, history, n):
        self.calls += 1
        return fresh(iter(space), history, n)


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch, tmp_path):
    """No LLM settings from the machine, and whatever a test's .env loads is undone after."""
    for name in ENV:
        monkeypatch.setenv(name, "unset")  # recorded, so the teardown removes what .env adds
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(llm_module, "_MODE_BY_SERVER", {})  # ports are reused across tests


@pytest.fixture
def space():
    return SearchSpace.for_problem(Problem(64, 64, 64))


@pytest.fixture
def history(space):
    c = space.configs()
    p = space.problem
    return [Trial(p, c[0], "success", ms=0.5), Trial(p, c[1], "success", ms=0.25),
            Trial(p, c[2], "out_of_resources", error="OutOfResources: shared memory, Required: 999")]


@pytest.fixture
def new(space, history):
    """Untried valid configs, for the server to propose."""
    return fresh(iter(space), history, 6)


def llm(server: LLMServer, *, timeout: float = 5.0, max_retries: int = 0, **options) -> LLMStrategy:
    client = openai.OpenAI(api_key=KEY, base_url=server.url, timeout=timeout, max_retries=max_retries)
    options.setdefault("fallback", InOrder())
    return LLMStrategy(client=client, model="test-model", **options)


def last_user(request) -> str:
    return request.body["messages"][-1]["content"]


def test_good_reply_is_used_with_its_rationales_and_usage(space, history, new):
    with LLMServer([Reply(config_reply(new[:4]))]) as server:
        s = llm(server)
        out = s.propose(space, history, 4)
    assert out == new[:4]
    assert s.notes == {config_key(c): f"fits the problem ({i})" for i, c in enumerate(new[:4])}
    (prompt_tokens, completion_tokens), = server.usage
    assert s.last_stats["prompt_tokens"] == prompt_tokens > 0
    assert s.last_stats["completion_tokens"] == completion_tokens > 0
    assert s.last_stats["fallback"] == 0 and s.last_stats["rejected"] == 0
    assert s.last_stats["latency_s"] > 0
    assert s.events == [] and s.fallback.calls == 0
    (request,) = server.chat_requests()
    assert request.body["model"] == "test-model"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    fmt = request.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    props = fmt["json_schema"]["schema"]["$defs"]["KernelConfigProposal"]["properties"]
    assert props["block_m"]["enum"] == list(space.choices["block_m"])
    prompt = last_user(request)
    assert "M=64, N=64, K=64" in prompt and "float16" in prompt
    assert f"block_k: {', '.join(map(str, space.choices['block_k']))}" in prompt
    # best first, the failure with its reason, and the request for n configs
    assert prompt.index("0.25 ms") < prompt.index("0.5 ms")
    assert "out_of_resources: OutOfResources: shared memory, Required: 999" in prompt
    assert "Propose 4 new configs" in prompt


def test_malformed_json_is_sent_back_once_and_repaired(space, history, new):
    broken = '{"configs": [{"block_m": 16,'
    with LLMServer([Reply(broken), Reply(config_reply(new[:3]))]) as server:
        s = llm(server)
        out = s.propose(space, history, 3)
    assert out == new[:3]
    first, repair = server.chat_requests()
    assert repair.body["messages"][-2] == {"role": "assistant", "content": broken}
    assert "not valid JSON" in last_user(repair) and "Reply with 3 replacement" in last_user(repair)
    assert s.last_stats["rejected"] == 1 and s.last_stats["fallback"] == 0
    assert s.last_stats["prompt_tokens"] == sum(u[0] for u in server.usage)


def test_malformed_twice_the_fallback_fills(space, history):
    with LLMServer([Reply("not json at all"), Reply("{still: not}")]) as server:
        s = llm(server)
        out = s.propose(space, history, 3)
    assert len(server.chat_requests()) == 2  # one repair, no more
    assert out == fresh(iter(space), history, 3)
    assert s.last_stats["fallback"] == 3
    assert set(s.notes.values()) == {"inorder (LLM fallback)"}
    assert "filled 3" in s.events[-1]


def test_invalid_configs_are_rejected_with_reasons_repaired_once_then_dropped(space, history, new):
    as_dict = [c.model_dump() for c in new]
    first = json.dumps({"configs": [
        {**as_dict[0], "rationale": "good"},
        {**as_dict[1], "block_m": 512, "rationale": "too big for KernelConfig"},
        {**as_dict[1], "block_m": 128, "rationale": "valid kernel, outside this space"},
        {**as_dict[1], "tile": 3, "rationale": "unknown key"},
        {**history[0].config.model_dump(), "rationale": "already tried"},
        {**as_dict[0], "rationale": "repeated"},
        {"block_m": 32, "rationale": "missing keys"},
    ]})
    second = json.dumps({"configs": [
        {**as_dict[1], "rationale": "fixed"},
        {**as_dict[2], "num_warps": 3, "rationale": "still wrong"},
    ]})
    with LLMServer([Reply(first), Reply(second)]) as server:
        s = llm(server)
        out = s.propose(space, history, 3)
    assert len(server.chat_requests()) == 2
    repair = last_user(server.chat_requests()[1])
    for reason in ("must be a power of two in [16, 256], got 512", "block_m=128 is outside the space",
                   "unknown keys tile", "already tried", "repeated in this reply", "missing block_n"):
        assert reason in repair
    assert "Reply with 2 replacement" in repair
    assert out[:2] == new[:2] and len(out) == 3  # the third filled by the fallback
    assert len({config_key(c) for c in out}) == 3
    assert all(space.contains(c) for c in out)
    assert not {config_key(c) for c in out} & {config_key(o.config) for o in history}
    assert s.notes[config_key(new[0])] == "good" and s.notes[config_key(new[1])] == "fixed"
    assert s.notes[config_key(out[2])] == "inorder (LLM fallback)"
    assert s.last_stats["rejected"] == 7 and s.last_stats["fallback"] == 1
    assert any("sent back once: 1 replacements accepted, 1 dropped" in e for e in s.events)


def test_rate_limited_then_success(space, history, new):
    limited = Reply(status=429, error="slow down", headers={"retry-after-ms": "10"})
    with LLMServer([limited, Reply(config_reply(new[:2]))]) as server:
        s = llm(server, max_retries=1)  # the SDK's own retry, no second loop
        out = s.propose(space, history, 2)
    assert out == new[:2]
    assert len(server.chat_requests()) == 2
    assert s.last_stats["fallback"] == 0 and s.events == []


def test_timeout_the_fallback_fills_and_the_run_goes_on(space, history, new):
    with LLMServer([Reply(config_reply(new[:2]), delay=10)]) as server:
        s = llm(server, timeout=0.3)
        start = time.perf_counter()
        out = s.propose(space, history, 2)
        elapsed = time.perf_counter() - start
    assert elapsed < 5
    assert out == fresh(iter(space), history, 2)
    assert s.last_stats["fallback"] == 2
    assert "no reply within 0.3 s" in s.events[-1] and not s.gave_up


def test_repeated_failures_hand_over_to_the_fallback_for_good(space, history):
    with LLMServer(default=Reply(status=503, error="overloaded")) as server:
        s = llm(server)
        for _ in range(GIVE_UP_AFTER):
            assert len(s.propose(space, history, 2)) == 2
        assert s.gave_up and "proposes from now on" in s.events[-1]
        assert "HTTP 503: overloaded" in s.events[0]
        asked = len(server.chat_requests())
        assert len(s.propose(space, history, 2)) == 2
        assert len(server.chat_requests()) == asked == GIVE_UP_AFTER


def test_a_server_that_rejects_json_schema_gets_json_object_from_then_on(space, history, new):
    with LLMServer([Reply(config_reply(new[:2])), Reply(config_reply(new[2:4]))],
                   reject_formats=("json_schema",)) as server:
        s = llm(server)
        first = s.propose(space, history, 2)
        second = llm(server).propose(space, history, 2)  # `loop` makes a strategy per problem
    assert first == new[:2] and second == new[2:4]
    assert [r.response_format for r in server.chat_requests()] == ["json_schema", "json_object", "json_object"]
    assert len(s.events) == 1 and "rejected response_format json_schema" in s.events[0]


def test_a_server_that_takes_no_response_format_gets_plain_text(space, history, new):
    fenced = "Here you go:\n```json\n" + config_reply(new[:2]) + "\n```"
    with LLMServer([Reply(fenced)], reject_formats=("json_schema", "json_object")) as server:
        s = llm(server)
        assert s.propose(space, history, 2) == new[:2]
    assert [r.response_format for r in server.chat_requests()] == ["json_schema", "json_object", None]


def test_once_a_mode_has_worked_a_400_is_an_error_not_a_downgrade(space, history, new):
    bad = Reply(status=400, error="context length exceeded")
    with LLMServer([Reply(config_reply(new[:1])), bad]) as server:
        s = llm(server)
        s.propose(space, history, 1)
        assert len(s.propose(space, history, 1)) == 1  # the fallback's
    assert [r.response_format for r in server.chat_requests()] == ["json_schema", "json_schema"]
    assert "HTTP 400: context length exceeded" in s.events[-1]


def test_no_server_listening_the_fallback_fills(space, history):
    import socket

    with socket.socket() as sock:  # bound, never listening: connections are refused, and no other test takes the port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        url = f"http://user:url-secret-1234@127.0.0.1:{port}/v1"  # credentials in the URL are secrets too
        client = openai.OpenAI(api_key=KEY, base_url=url, max_retries=0, timeout=2)
        s = LLMStrategy(client=client, model="m", fallback=InOrder())
        assert s.propose(space, history, 2) == fresh(iter(space), history, 2)
    assert "cannot reach http://user:***@127.0.0.1" in s.events[-1] and "url-secret" not in s.events[-1]


def test_json_in_prose_or_fences_is_found(space, new):
    reply = "Here you go:\n```json\n" + config_reply(new[:2]) + "\n```\nGood luck."
    accepted, reasons = check_reply(reply, space, set(), 2)
    assert [c for c, _ in accepted] == new[:2] and reasons == []
    bare_list = json.dumps(json.loads(config_reply(new[:2]))["configs"])
    accepted, reasons = check_reply(bare_list, space, set(), 2)
    assert [c for c, _ in accepted] == new[:2] and reasons == []


def test_the_model_defaults_to_the_one_the_server_serves(space, history, new):
    with LLMServer([Reply(config_reply(new[:1]))], models=("served-7b",)) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url, max_retries=0)
        s = LLMStrategy(client=client, fallback=InOrder())
        assert s.propose(space, history, 1) == new[:1]
    assert server.chat_requests()[0].body["model"] == "served-7b"


def test_settings_come_from_dotenv_without_overriding_the_environment(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={KEY}\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n"
                                   "AUTOKERNEL_LLM_MODEL=from-dotenv\n")
    monkeypatch.setenv("AUTOKERNEL_LLM_MODEL", "from-env")
    s = make_llm_strategy("llm", fallback=InOrder())
    assert s.model() == "from-env"
    assert str(s.client.base_url) == "http://127.0.0.1:9/v1/" and s.client.api_key == KEY


def test_llm_without_key_or_url_is_a_clear_error():
    with pytest.raises(ValueError, match="OPENAI_API_KEY or OPENAI_BASE_URL"):
        make_llm_strategy("llm")


def test_the_key_never_surfaces(space, history, new, tmp_path, monkeypatch, capfd, caplog):
    """A hostile server echoes the key into a rationale and into error messages."""
    caplog.set_level(logging.DEBUG)

    def echo(request):
        return Reply(config_reply(new[:2], rationale=f"you sent {request.headers['authorization']}"))

    def error_500(request):
        return Reply(status=500, error=f"cannot use {request.headers['authorization']}")

    masked = f"{KEY[:7]}{'*' * 20}{KEY[-4:]}"
    script = [echo, error_500, Reply(status=401, error=f"Incorrect API key provided: {masked} or {KEY}")]
    with LLMServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        s = make_llm_strategy("llm", model="test-model", fallback=InOrder(), max_retries=0, timeout=5)
        store = History(tmp_path / "history.csv")
        run = new_run_id()
        for _ in range(3):
            for config in s.propose(space, history, 2):
                store.append(make_row("tune", space.problem, config, status="success", run_id=run,
                                      note=s.notes[config_key(config)]))
        assert s.gave_up  # a 401 cannot get better
    captured = capfd.readouterr()
    surfaced = "\n".join([*s.events, *map(str, (s.notes, s.last_stats)),
                          (tmp_path / "history.csv").read_text(), captured.out, captured.err, caplog.text])
    assert "you sent Bearer ***" in surfaced and "HTTP 500: cannot use Bearer ***" in surfaced
    assert "HTTP 401: Incorrect API key provided: *** or ***" in surfaced
    assert KEY not in surfaced and KEY[-12:] not in surfaced
    assert not any(KEY in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
                   and p.name != ".env")


def test_scrub_hides_the_key_and_its_masked_echo():
    assert scrub(f"token {KEY}!", [KEY, None]) == "token ***!"
    assert scrub("Incorrect API key provided: sk-test-01*****-key.", [KEY]) == "Incorrect API key provided: ***."
    assert scrub("short keys are left alone: ab", ["ab"]) == "short keys are left alone: ab"


def test_auto_seeds_tpe_with_the_llm_then_hands_over(space, history, new):
    tpe = InOrder("tpe")
    with LLMServer([Reply(config_reply(new[3:5]))]) as server:
        auto = AutoStrategy(tpe, llm(server, fallback=tpe), llm_generations=1)
        first = auto.propose(space, history, 2)
        assert first == new[3:5] and auto.notes and auto.last_stats["fallback"] == 0
        seeded = history + [Trial(space.problem, c, "success", ms=0.1) for c in first]
        second = auto.propose(space, seeded, 2)
    assert second == fresh(iter(space), seeded, 2) and tpe.calls == 1
    assert auto.notes == {} and len(server.chat_requests()) == 1
    assert "optuna's TPE refines" in auto.events[-1]


def test_auto_when_the_llm_fails_tpe_fills(space, history):
    tpe = InOrder("tpe")
    with LLMServer(default=Reply(status=500, error="down")) as server:
        auto = AutoStrategy(tpe, llm(server, fallback=tpe))
        out = auto.propose(space, history, 2)
    assert out == fresh(iter(space), history, 2) and tpe.calls == 1
    assert "tpe filled 2" in auto.events[-1]


def test_auto_without_key_or_url_is_optuna_alone_and_says_so(space, history):
    pytest.importorskip("autokernel.tuning.strategies.optuna_tpe")
    auto = make_llm_strategy("auto", seed=0)
    assert auto.llm is None and auto.tpe.name == "optuna"
    assert len(auto.events) == 1 and "optuna's TPE proposes alone" in auto.events[0]
    assert len(auto.propose(space, history, 2)) == 2


def test_the_prompt_states_a_gpu_space_rules_and_a_replayed_sweep():
    from autokernel.tuning.space import GPU_CHOICES
    from autokernel.tuning.strategies.llm_prompt import Device, user_prompt

    full = SearchSpace(Problem(4096, 4096, 4096, "bf16"), dict(GPU_CHOICES), 232448, True, gpu=True)
    sweep = full.configs()[:5]
    space = SearchSpace(full.problem, full.choices, full.smem_limit, True, gpu=True,
                        allowed=frozenset(config_key(c) for c in sweep))
    prompt = user_prompt(space, [Trial(space.problem, sweep[0], "success", ms=1.0)], 2, Device.current(space))
    assert "shared memory per program: 232448 bytes" in prompt
    assert ("* 2 bytes, plus block_m*block_n*2 / epilogue_subtile bytes unless variant is \"grouped\", "
            "must be <= 232448") in prompt
    assert "block_m * block_n / (32 * num_warps * (2 if warp_specialize else 1)) <= 128" in prompt
    assert "block_m >= 64" in prompt and "warp_specialize only with num_warps 4" in prompt
    assert "Only these 4 untried configs can be measured" in prompt
    listed = prompt.split("can be measured")[1]
    assert all(json.dumps(c.model_dump(), separators=(",", ":")) in listed for c in sweep[1:])
    assert json.dumps(sweep[0].model_dump(), separators=(",", ":")) not in listed


def test_a_broken_openai_install_falls_back_instead_of_crashing(monkeypatch):
    """Seen on the GPU machine: openai imported but its own dependency (httpx2) was missing.
    The generation is filled by the fallback and the run goes on, with one event saying why."""
    import builtins

    from autokernel.records import Problem
    from autokernel.tuning.space import SearchSpace
    from autokernel.tuning.strategies.llm import LLMStrategy

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "openai":
            raise ModuleNotFoundError("No module named 'httpx2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setattr(builtins, "__import__", broken)
    strategy = LLMStrategy(seed=0)
    space = SearchSpace.for_problem(Problem(32, 32, 32))
    proposed = strategy.propose(space, [], 3)
    assert len(proposed) == 3 and all(space.contains(c) for c in proposed)
    assert any("openai package cannot be imported" in e for e in strategy.events)


def test_a_reply_without_split_k_means_no_split(space, history, new):
    """A model (or a json_object / plain-text reply) that leaves split_k out proposes split_k=1,
    rather than having every config rejected as incomplete."""
    plain = [c for c in new if c.split_k == 1][:2]
    items = [{k: v for k, v in c.model_dump().items() if k != "split_k"} | {"rationale": "r"} for c in plain]
    with LLMServer([Reply(json.dumps({"configs": items}))]) as server:
        s = llm(server)
        out = s.propose(space, history, 2)
    assert out == plain and s.last_stats["rejected"] == 0
