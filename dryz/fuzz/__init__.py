"""Fuzzing: the atheris harness (harness.py) and the native-coverage build of libllama (native.py).

Both are importable from an installed dryz (no paths into a checkout): `dryz fuzz` writes a small executable
launcher for the harness into its work directory, because libFuzzer's fork mode re-executes argv[0].
"""
