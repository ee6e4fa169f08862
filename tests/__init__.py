"""The test suite, in folders that follow the package's layers: records, kernels, pick (the
run-time choice of a config), op (matmul, linear, nn), measure, tuning, cli, and benchmarks
(smoke tests of benchmarks/, run as programs). Shared fixtures are in conftest.py, shared
helpers in helpers.py, recorded data in data/."""
