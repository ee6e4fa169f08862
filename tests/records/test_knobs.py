"""The knobs table (autokernel/knobs.py) against KernelConfig: every field a knob, every
knob's values accepted, every rule of config level enforced with its message."""

from __future__ import annotations

import random
import typing

import pytest

from autokernel import knobs
from autokernel.records import ConfigError, KernelConfig


def test_every_field_is_a_knob_in_order_with_its_default():
    assert tuple(KernelConfig.model_fields) == knobs.NAMES
    for name, field in KernelConfig.model_fields.items():
        assert field.default == knobs.DEFAULTS[name], name
    variant = KernelConfig.model_fields["variant"].annotation
    assert typing.get_args(variant) == knobs.KNOB["variant"].choices


@pytest.mark.parametrize("knob", knobs.KNOBS, ids=lambda k: k.name)
def test_each_value_of_a_knob_is_a_config_and_its_neighbours_are_not(knob):
    for value in knob.values:  # one knob off its default at a time breaks no rule
        assert getattr(KernelConfig.from_dict({knob.name: value}), knob.name) == value
    if knob.bounds is not None:
        lo, hi = knob.bounds
        for bad in (lo - 1, hi + 1):
            with pytest.raises(ConfigError, match=f"{knob.name}: must be"):
                KernelConfig.from_dict({knob.name: bad})
    elif knob.is_int:
        with pytest.raises(ConfigError, match=f"{knob.name}: must be one of"):
            KernelConfig.from_dict({knob.name: max(knob.choices) + 1})
    assert knob.meaning and set(knob.kernels) <= set(knobs.KERNELS)


def test_the_rules_name_known_knobs_and_each_config_rule_is_enforced_with_its_message():
    for rule in knobs.RULES:
        assert set(rule.knobs) <= set(knobs.NAMES) and set(rule.when) <= set(rule.knobs), rule.name
    small = {k.name: k.values if len(k.values) <= 5 else (k.values[0], k.default, k.values[-1]) for k in knobs.KNOBS}
    rng = random.Random(0)
    broken = {r.name: 0 for r in knobs.CONFIG_RULES}
    for _ in range(4000):
        v = {name: rng.choice(values) for name, values in small.items()}
        first = next((r for r in knobs.CONFIG_RULES if r.broken(v)), None)
        if first is None:
            KernelConfig(**v)
            continue
        broken[first.name] += 1
        with pytest.raises(ConfigError) as info:
            KernelConfig.from_dict(v)
        assert str(info.value).endswith(first.message(v)), (v, str(info.value))
    assert all(broken.values()), broken  # each rule was the reason at least once


def test_the_label_writes_each_option_by_its_tag():
    config = KernelConfig(variant="tma", warp_specialize=True, num_warps=4, num_stages=4)
    assert config.short() == "128x128x64 g8 w4 s4 tma ws"
    assert KernelConfig(split_k=4, variant="grouped").short() == "128x128x64 g8 w8 s3 grouped k4"
    assert KernelConfig(flatten=True, epilogue_subtile=2).short() == "128x128x64 g8 w8 s3 st2 fl"
    assert KernelConfig(stream_k=True).short() == "128x128x64 g8 w8 s3 sk"


def test_on_variant_drops_the_tma_options_the_table_names():
    tma = KernelConfig(variant="tma", epilogue_subtile=2, flatten=True)
    assert tma.tma_options() and set(knobs.TMA_OPTIONS) == {"warp_specialize", "epilogue_subtile", "flatten",
                                                                   "swap_ab"}
    grouped = tma.on_variant("grouped")
    assert not grouped.tma_options() and all(getattr(grouped, n) == knobs.DEFAULTS[n] for n in knobs.TMA_OPTIONS)
    assert tma.on_variant("auto") == tma.model_copy(update={"variant": "auto"})


def test_narrow_fills_unnamed_knobs_and_refuses_values_outside_a_knob():
    choices = knobs.narrow(block_m=(64, 128))
    assert tuple(choices) == knobs.NAMES and choices["block_m"] == (64, 128)
    assert choices["flatten"] == (False, True) and choices["block_k"] == (16, 32, 64, 128, 256)
    with pytest.raises(ValueError, match="block_m"):
        knobs.narrow(block_m=(48,))
    with pytest.raises(ValueError, match="flatten"):
        knobs.narrow(flatten=(1,))
    with pytest.raises(ValueError, match="no knob named blocks"):
        knobs.narrow(blocks=(1,))
