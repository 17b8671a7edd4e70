"""A shipped-style adapter whose own code fails (not the engine's): dryz stops, exit 2 (tests/test_engines.py)."""

import sys

from dryz.subject.engines import exllamav2


class Broken(exllamav2.Adapter):
    def run(self, req):
        return {}["no such key"]


sys.exit(exllamav2.main(Broken))
