"""exllamav2's adapter with a planted bug: the penalty exponent off by one (allowed_length - 1 reaches the engine).
dryz must report it as a difference (tests/test_engines.py)."""

import sys

from dryz.subject.engines import exllamav2


class Planted(exllamav2.Adapter):
    def run(self, req):
        req["params"]["allowed_length"] = int(req["params"]["allowed_length"]) - 1
        return super().run(req)


sys.exit(exllamav2.main(Planted))
