"""Tuning: a search space per problem, strategies that propose configs from the history,
and the loop that evaluates, records and feeds the results back.

The tuner knows kernels only through one evaluation call (``autokernel.evaluate``, run
in an isolated worker by ``tuning.worker``); strategies never launch kernels and never
write files.
"""
