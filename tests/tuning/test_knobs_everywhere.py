"""The knobs table (autokernel/knobs.py) is what the search space and the LLM prompt are
made of: every knob an axis of the space and a line of the prompt, every rule pruned by
the space and stated in the prompt, and a knob or rule added to the table reaches both."""

from __future__ import annotations

import dataclasses

import pytest

from autokernel import knobs
from autokernel.records import KernelConfig, Problem
from autokernel.tuning.space import GPU_CHOICES, INTERPRETER_CHOICES, PARAMS, SearchSpace, build_config
from autokernel.tuning.strategies import llm_prompt
from autokernel.tuning.strategies.llm import _MAY_OMIT


def _gpu_space() -> SearchSpace:
    return SearchSpace(Problem(4096, 4096, 4096, "bf16"), dict(GPU_CHOICES), 232448, True, gpu=True, programs=132)


def test_every_knob_is_an_axis_of_both_spaces_within_what_it_allows():
    assert PARAMS == knobs.NAMES
    for choices in (GPU_CHOICES, INTERPRETER_CHOICES):
        assert tuple(choices) == knobs.NAMES
        for name, values in choices.items():
            assert values and all(knobs.KNOB[name].why_not(v) is None for v in values), name


def test_the_prompt_describes_every_knob_and_states_every_rule():
    space = _gpu_space()
    prompt = llm_prompt.user_prompt(space, [], 2, llm_prompt.Device.current(space))
    for knob in knobs.KNOBS:
        assert f"- {knob.name}: " in prompt and knob.meaning in prompt, knob.name
    for rule in knobs.RULES:
        assert rule.statement in prompt, rule.name  # every knob varies in the GPU space: every rule can bite
    for kernel, what in knobs.KERNELS.items():
        assert f"- {kernel}: {what}" in prompt
    # a space that keeps the TMA options at their defaults leaves out the rules only they break
    fixed = dataclasses.replace(space, choices={**space.choices, **{n: (knobs.DEFAULTS[n],) for n in knobs.TMA_OPTIONS}})
    lines = llm_prompt._rule_lines(fixed)
    assert not [line for line in lines if "warp_specialize" in line]
    assert f"- {next(r for r in knobs.RULES if r.name == 'tile_vs_warps').statement}" in lines


def test_every_rule_prunes_the_space_and_the_llm_may_omit_the_options_of_one_kernel():
    space = _gpu_space()
    ws = KernelConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3, variant="tma",
                      warp_specialize=True)
    assert space.why_invalid(ws) is None
    for rule in knobs.RULES:
        # a config that breaks the rule reaches the space as a model_copy, past KernelConfig's checks
        broken = {
            "tma_options_need_tma": {"variant": "auto"}, "tma_options_not_on_pointers": {"variant": "grouped"},
            "ws_stages": {"num_stages": 5}, "one_way_to_split_k": {"warp_specialize": False, "variant": "grouped",
                                                                   "split_k": 2, "stream_k": True},
            "tile_vs_warps": {"block_m": 16, "block_n": 16}, "ws_warps": {"num_warps": 8},
            "ws_subtile": {"epilogue_subtile": 2}, "ws_flatten": {"flatten": True}, "ws_rows": {"block_m": 32},
            "ws_64x256": {"block_m": 64, "block_n": 256}, "split_k_on_grouped": {"warp_specialize": False, "split_k": 2},
            "stream_k_on_grouped_or_tma": {"warp_specialize": False, "stream_k": True, "variant": "auto"},
            "stream_k_not_warp_specialized": {"stream_k": True}, "swap_not_warp_specialized": {"swap_ab": True},
        }[rule.name]
        config = ws.model_copy(update=broken)
        assert rule.broken(vars(config)), rule.name
        assert space.why_invalid(config) is not None, rule.name
        if rule.level == knobs.CONFIG:
            assert build_config(vars(config)) is None, rule.name
    assert _MAY_OMIT == {"split_k": 1, "warp_specialize": False, "epilogue_subtile": 1, "flatten": False,
                         "stream_k": False, "swap_ab": False}


def test_a_knob_and_a_rule_added_to_the_table_reach_the_space_and_the_prompt(monkeypatch):
    extra = knobs.Knob("swizzle", 1, ("tma",), "a made-up option, to show where a new knob goes",
                       choices=(1, 2, 4), tag="sw{}")
    rule = knobs.Rule("swizzle_on_tma", knobs.SPACE, ("swizzle", "variant"),
                      lambda v: v["swizzle"] > 1 and v["variant"] != "tma",
                      lambda v: "swizzle is an option of the TMA kernel", "swizzle > 1 only with variant \"tma\"",
                      when=("swizzle",))
    monkeypatch.setattr(knobs, "KNOBS", (*knobs.KNOBS, extra))
    monkeypatch.setattr(knobs, "KNOB", {**knobs.KNOB, "swizzle": extra})
    monkeypatch.setattr(knobs, "NAMES", (*knobs.NAMES, "swizzle"))
    monkeypatch.setattr(knobs, "RULES", (*knobs.RULES, rule))
    choices = knobs.narrow(block_m=(64, 128))
    assert choices["swizzle"] == (1, 2, 4)
    space = dataclasses.replace(_gpu_space(), choices=choices)
    assert f"- swizzle: 1, 2, 4: {extra.meaning} (default 1; read by the tma kernel alone)" in llm_prompt._knob_lines(space)
    assert "- swizzle > 1 only with variant \"tma\"" in llm_prompt._rule_lines(space)
    assert knobs.why_broken({"swizzle": 2, "variant": "grouped"}, (rule,)) == "swizzle is an option of the TMA kernel"
    assert "swizzle" in knobs.options_of("tma")


@pytest.mark.parametrize("choices", [GPU_CHOICES, INTERPRETER_CHOICES], ids=["gpu", "interpreter"])
def test_the_reply_schema_takes_each_knob_of_the_space(choices):
    space = SearchSpace(Problem(256, 256, 256), dict(choices))
    props = llm_prompt.reply_model(space).model_json_schema()["$defs"]["KernelConfigProposal"]["properties"]
    assert set(props) == {"rationale", *knobs.NAMES}
