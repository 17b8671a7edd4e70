"""`--subject engine:mistralrs-cached`: mistral.rs 0.9.5 as users run it, its prefix cache on (the default
prefix_cache_n): every case the first request of a fresh Runner, and request sequences on one Runner each, as a
user's instance answers them; `engine:mistralrs` runs the same adapter with the cache off. One adapter for both:
dryz/subject/engines/mistralrs.py."""

import sys

from .mistralrs import main

if __name__ == "__main__":
    sys.exit(main(cached=True))
