"""`python -m controller` is `p4reduce-ctl`."""

from controller.cli import main

raise SystemExit(main())
