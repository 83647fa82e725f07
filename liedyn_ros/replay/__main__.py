"""`python -m liedyn_ros.replay BAG ... --out DIR`: same as `liedyn-replay`."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
