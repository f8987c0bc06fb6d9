"""`python -m bridge.cli`: the same command as the `mcp-chat-bridge` script."""

import sys

from bridge.cli.entry import main

sys.exit(main())
